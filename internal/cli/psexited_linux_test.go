package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

// A row whose process has exited is listed, with state exited, while the scope it records still
// holds processes: the daemon a leader left behind in its cgroup, or on the process-group path in
// the group it led. Once the owner has stopped what is left, the row is gone from the listing.
func TestPsListsAnExitedLeaderWhoseScopeLives(t *testing.T) {
	kinds := []string{scope.KindGroup.Containment()}
	if k, _, why := scope.Containment(); k == scope.KindCgroup {
		kinds = append(kinds, k.Containment())
	} else if testproc.Privileged() {
		t.Fatalf("cgroup containment required ($CUSTODY_REQUIRE_PRIVILEGED=1): %v", why)
	} else {
		t.Logf("the cgroup path is not tested: %v", why)
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			if kind == scope.KindGroup.Containment() {
				t.Setenv(scope.EnvContainment, kind)
			}
			led := ledgerPath(t)
			o := &custody.Owner{Ledger: ledger.Open(led), Supervisor: &supervise.Client{}}
			defer o.Supervisor.Close()
			defer o.Close()
			// A job in the background stays in the shell's process group and cgroup.
			cmd := exec.Command("sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & echo $!")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			c, err := o.Start(context.Background(), cmd, custody.StartOptions{Purpose: "daemonizer"})
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			sc.Scan()
			pid, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("the daemon's pid: %q", sc.Text())
			}
			daemon, err := procid.Read(pid)
			if err != nil {
				t.Fatal(err)
			}
			c.Wait() // the leader has exited; its scope, holding the daemon, is not released
			if got := psState(t, led, c.ID.PID); got != "exited" {
				t.Fatalf("ps --json: the exited leader's row has state %q, want exited", got)
			}
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			testproc.WaitFor(t, 30*time.Second, func() error {
				if daemon.ID.Verify() == nil {
					return fmt.Errorf("the daemon %v outlives its owner's Close", daemon.ID)
				}
				return nil
			})
			if got := psState(t, led, c.ID.PID); got != "" {
				t.Fatalf("ps --json after the stop: the row is listed, state %q", got)
			}
		})
	}
}

// psState runs custody ps --json on the ledger at led and returns the state of pid's row, or ""
// when it is not listed.
func psState(t *testing.T, led string, pid int) string {
	t.Helper()
	r := runCLI(t, "--ledger", led, "ps", "--json")
	if r.code != 0 {
		t.Fatalf("ps --json: %+v", r)
	}
	var rows []struct {
		PID   int    `json:"pid"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("ps --json: %v\n%s", err, r.stdout)
	}
	for _, row := range rows {
		if row.PID == pid {
			return row.State
		}
	}
	return ""
}
