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

func init() { testproc.Register("pidns-witness", helperPIDNSWitness) }

// TestPIDReuseWitness: in a PID namespace, a registered group leader exits and a stranger is made
// to receive its PID and lead a group with the same id. `custody stop` answers no-authority and
// `custody reap` keeps the row, saying why; the stranger lives through both.
func TestPIDReuseWitness(t *testing.T) {
	testproc.RequireRoot(t)
	cmd := testproc.Helper(t, "pidns-witness", filepath.Join(t.TempDir(), "spawn-ledger.json"))
	testproc.NewPIDNamespace(cmd)
	p := testproc.Start(t, cmd)
	f := p.Expect("result ", 60*time.Second)
	if f[0] != "ok" {
		t.Fatalf("in the PID namespace: %s", strings.Join(f, " "))
	}
}

// helperPIDNSWitness runs as PID 1 of a new PID namespace.
func helperPIDNSWitness(args []string) int {
	result := func(format string, a ...any) int {
		fmt.Printf("result "+format+"\n", a...)
		return 0
	}
	if err := testproc.MountProc(); err != nil {
		return result("mount proc: %v", err)
	}
	led := args[0]
	spawner, spawnerIn := startCat(false)
	a, aIn := startCat(true)
	incA, err1 := procid.Read(a.Process.Pid)
	incS, err2 := procid.Read(spawner.Process.Pid)
	if err1 != nil || err2 != nil {
		return result("read: %v %v", err1, err2)
	}
	row := ledger.NewRow(incA, incS)
	row.Purpose, row.Scope, row.PGID, row.Reapable = "serve", "pgrp", &incA.PID, &[]bool{true}[0]
	if _, err := ledger.Open(led).Add(context.Background(), row); err != nil {
		return result("add: %v", err)
	}
	for _, c := range []struct {
		cmd *exec.Cmd
		in  interface{ Close() error }
	}{{spawner, spawnerIn}, {a, aIn}} {
		c.in.Close()
		c.cmd.Wait()
	}
	// The stranger, leading a group whose id is A's.
	b, err := testproc.ReusePID(incA.PID, incA.Start, func() (*exec.Cmd, error) {
		b := exec.Command("cat")
		b.Stdin = os.Stdin // this helper's lifeline
		b.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return b, b.Start()
	})
	if err != nil {
		return result("reuse pid %d: %v", incA.PID, err)
	}
	defer func() { b.Process.Kill(); b.Wait() }()
	out, err := runCustody("--ledger", led, "stop", "--json", "--grace", "200ms", strconv.Itoa(incA.PID))
	var outcomes []outcome
	if jerr := json.Unmarshal(out, &outcomes); jerr != nil || len(outcomes) != 1 || outcomes[0].Outcome != "no-authority" {
		return result("stop: %s (%v)", bytes.TrimSpace(out), err)
	}
	out, err = runCustody("--ledger", led, "reap", "--all", "--json", "--grace", "200ms")
	var ds []decision
	if jerr := json.Unmarshal(out, &ds); jerr != nil || len(ds) != 1 || ds[0].Action != "keep" || ds[0].Reason != "pid-reused" {
		return result("reap: %s (%v)", bytes.TrimSpace(out), err)
	}
	if inc, err := procid.Read(b.Process.Pid); err != nil || inc.PGID != incA.PID {
		return result("the stranger did not survive: %v", err)
	}
	return result("ok")
}

func startCat(ownGroup bool) (*exec.Cmd, interface{ Close() error }) {
	c := exec.Command("cat")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: ownGroup}
	in, _ := c.StdinPipe()
	if err := c.Start(); err != nil {
		panic(err)
	}
	return c, in
}

func runCustody(args ...string) ([]byte, error) {
	exe, _ := os.Executable()
	c := exec.Command(exe, args...)
	c.Env = append(os.Environ(), testproc.Env("custody"))
	c.Stderr = os.Stderr
	return c.Output()
}
