package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

func init() { testproc.Register("pidns-same-tick", helperPIDNSSameTick) }

// TestSameTickReuse: in a PID namespace, a registered group leader A is killed and a stranger B
// is made to take its PID, and to lead a group with its id, within the clock tick A started in:
// A's row and B have the same boot id and start ticks, which the test asserts. Only the row's
// pidfs id tells them apart, and with it `custody ps` does not call the row alive, `custody stop`
// answers no-authority and `custody reap` keeps the row as pid-reused; B lives through all three.
func TestSameTickReuse(t *testing.T) {
	testproc.RequireRoot(t)
	if err := procid.PidfsError(); err != nil {
		testproc.Skip(t, "skipping: pidfs ids unavailable: %v", err)
	}
	cmd := testproc.Helper(t, "pidns-same-tick", filepath.Join(t.TempDir(), "spawn-ledger.json"))
	testproc.NewPIDNamespace(cmd)
	p := testproc.Start(t, cmd)
	f := p.Expect("result ", 120*time.Second)
	if f[0] != "ok" {
		t.Fatalf("in the PID namespace: %s", strings.Join(f, " "))
	}
	t.Logf("same-tick reuse: %s", strings.Join(f[1:], " "))
}

// helperPIDNSSameTick runs as PID 1 of a new PID namespace.
func helperPIDNSSameTick(args []string) int {
	result := func(format string, a ...any) int {
		fmt.Printf("result "+format+"\n", a...)
		return 0
	}
	if err := testproc.MountProc(); err != nil {
		return result("mount proc: %v", err)
	}
	led := args[0]
	self, err := procid.Self()
	if err != nil || self.PidfdID == 0 {
		return result("self: %v, pidfs id %d", err, self.PidfdID)
	}
	var incA procid.Incarnation
	victim := func() (int, uint64, func(), error) {
		a, in := startCat(true)
		inc, err := procid.ReadExact(a.Process.Pid)
		incA = inc
		return a.Process.Pid, inc.Start, func() { a.Process.Kill(); in.Close(); a.Wait() }, err
	}
	stranger := func() (*exec.Cmd, int, error) {
		b := exec.Command("cat")
		b.Stdin = os.Stdin // this helper's lifeline
		b.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		err := b.Start()
		if err != nil {
			return nil, 0, err
		}
		return b, b.Process.Pid, nil
	}
	discard := func(b *exec.Cmd) { b.Process.Kill(); b.Wait() }
	tick := func(pid int) (uint64, error) {
		inc, err := procid.Read(pid)
		return inc.Start, err
	}
	b, tries, err := testproc.ReuseWithinTick(500, victim, stranger, discard, tick)
	if err != nil {
		return result("%v", err)
	}
	defer discard(b)
	incB, err := procid.ReadExact(b.Process.Pid)
	switch {
	case err != nil:
		return result("read B: %v", err)
	case incB.PID != incA.PID || incB.Start != incA.Start || incB.BootID != incA.BootID || incB.PGID != incA.PID:
		return result("B %v (group %d, boot %s) does not share A's pid, group, boot and tick %v", incB.ID, incB.PGID, incB.BootID, incA.ID)
	case incB.PidfdID == incA.PidfdID:
		return result("A and B share pidfs id %d", incA.PidfdID)
	}
	row := ledger.NewRow(incA, self)
	row.Purpose, row.Scope, row.PGID, row.Reapable = "serve", "pgrp", &incA.PID, &[]bool{true}[0]
	if row.PidfdID == nil || row.SpawnerPidfdID == nil {
		return result("row without pidfs ids: %+v", row)
	}
	// The witness: by start ticks alone, the dead row is B.
	ticksOnly := row.Record()
	ticksOnly.PidfdID = nil
	if s, proof := ticksOnly.Check(true); s != procid.Alive || proof != procid.ExactProof {
		return result("by start ticks alone the row reads %v, not alive: the tick is not shared", s)
	}
	if _, err := ledger.Open(led).Add(context.Background(), row); err != nil {
		return result("add: %v", err)
	}
	if why := checkSameTick(led, incA.PID); why != "" {
		return result("%s", why)
	}
	if inc, err := procid.ReadExact(b.Process.Pid); err != nil || inc.PidfdID != incB.PidfdID || inc.PGID != incA.PID {
		return result("the stranger did not survive: %v", err)
	}
	return result("ok pid %d tick %d after %d tries: pidfs ids %d (row) and %d (stranger)",
		incA.PID, incA.Start, tries, incA.PidfdID, incB.PidfdID)
}

// checkSameTick runs ps, stop and reap on the ledger whose one row names pid, and says what went
// wrong, or "".
func checkSameTick(led string, pid int) string {
	out, err := runCustody("--ledger", led, "ps", "--all", "--json")
	var rows []struct {
		PID   int    `json:"pid"`
		State string `json:"state"`
	}
	if jerr := json.Unmarshal(out, &rows); jerr != nil || err != nil {
		return fmt.Sprintf("ps: %s (%v, %v)", bytes.TrimSpace(out), err, jerr)
	}
	for _, r := range rows {
		if r.PID == pid && r.State == "alive" {
			return fmt.Sprintf("ps: the dead row reads alive: %s", bytes.TrimSpace(out))
		}
	}
	out, err = runCustody("--ledger", led, "stop", "--json", "--grace", "200ms", strconv.Itoa(pid))
	var outcomes []outcome
	if jerr := json.Unmarshal(out, &outcomes); jerr != nil || len(outcomes) != 1 || outcomes[0].Outcome != "no-authority" {
		return fmt.Sprintf("stop: %s (%v)", bytes.TrimSpace(out), err)
	}
	out, err = runCustody("--ledger", led, "reap", "--all", "--json", "--grace", "200ms")
	var ds []decision
	if jerr := json.Unmarshal(out, &ds); jerr != nil || len(ds) != 1 || ds[0].Action != "keep" || ds[0].Reason != "pid-reused" {
		return fmt.Sprintf("reap: %s (%v)", bytes.TrimSpace(out), err)
	}
	return ""
}
