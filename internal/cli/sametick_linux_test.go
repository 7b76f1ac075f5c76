package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

func init() {
	testproc.Register("pidns-same-tick", testid.InPIDNamespace(testid.Case{Name: "result", Run: sameTickReuse}))
}

// TestSameTickReuse: in a PID namespace, a registered group leader A is killed and a stranger B
// is made to take its PID, and to lead a group with its id, within the clock tick A started in:
// A's row and B have the same boot id and start ticks, which the test asserts. Only the row's
// pidfs id tells them apart, and with it `custody ps` does not call the row alive, `custody stop`
// answers no-authority and `custody reap` keeps the row as pid-reused; B lives through all three.
func TestSameTickReuse(t *testing.T) {
	testid.RunInPIDNamespace(t, "pidns-same-tick", []string{"result"}, filepath.Join(t.TempDir(), "spawn-ledger.json"))
}

func sameTickReuse(args []string) (string, error) {
	led := args[0]
	self, err := procid.Self()
	if err != nil || self.PidfdID == 0 {
		return "", fmt.Errorf("self: %v, pidfs id %d", err, self.PidfdID)
	}
	s, err := testid.NewSameTick(500, nil)
	if err != nil {
		return "", err
	}
	defer s.End()
	incA := s.Victim
	row := ledger.NewRow(incA, self)
	row.Purpose, row.Scope, row.PGID, row.Reapable = "serve", "pgrp", &incA.PID, &[]bool{true}[0]
	if row.PidfdID == nil || row.SpawnerPidfdID == nil {
		return "", fmt.Errorf("row without pidfs ids: %+v", row)
	}
	// The witness: by start ticks alone, the dead row is B.
	ticksOnly := row.Record()
	ticksOnly.PidfdID = nil
	if st, proof := ticksOnly.Check(true); st != procid.Alive || proof != procid.ExactProof {
		return "", fmt.Errorf("by start ticks alone the row reads %v, not alive: the tick is not shared", st)
	}
	if _, err := ledger.Open(led).Add(context.Background(), row); err != nil {
		return "", fmt.Errorf("add: %v", err)
	}
	if why := checkSameTick(led, incA.PID); why != "" {
		return "", errors.New(why)
	}
	return s.String(), s.Lives()
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
