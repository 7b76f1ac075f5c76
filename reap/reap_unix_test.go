//go:build unix

package reap_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/reap"
)

func TestMain(m *testing.M) { testproc.Main(m) }

func row(t *testing.T, pid int, spawner procid.Incarnation) ledger.Row {
	t.Helper()
	inc, err := procid.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	r := ledger.NewRow(inc, spawner)
	r.Purpose = "serve"
	return r
}

// TestDecide covers the rules the command-line tests do not reach.
func TestDecide(t *testing.T) {
	self, _ := procid.Self()
	parent, _ := procid.Read(os.Getppid())
	child := testproc.Start(t, exec.Command("cat"))
	gone := testproc.Start(t, exec.Command("cat"))
	goneRow := row(t, gone.Process.Pid, procid.Incarnation{})
	gone.Stdin().Close()
	gone.Wait()

	noProof := row(t, child.Process.Pid, procid.Incarnation{})
	noProof.StartTicks, noProof.CreateTime, noProof.BootStart = nil, nil, nil
	otherBoot := row(t, child.Process.Pid, procid.Incarnation{})
	boot := "another-boot"
	otherBoot.BootID = &boot

	type decideCase struct {
		desc   string
		row    ledger.Row
		action reap.Action
		reason string
	}
	tests := []decideCase{
		{"the reaper itself", row(t, self.PID, procid.Incarnation{}), reap.Keep, reap.SelfOrAncestor},
		{"the reaper's parent", row(t, parent.PID, procid.Incarnation{}), reap.Keep, reap.SelfOrAncestor},
		{"no spawner recorded", row(t, child.Process.Pid, procid.Incarnation{}), reap.Keep, reap.NoSpawner},
		{"exited", goneRow, reap.Gone, reap.AlreadyExited},
		{"no start recorded", noProof, reap.Keep, reap.IdentityUnproven},
		{"another boot", otherBoot, reap.Gone, reap.OtherBoot},
	}
	if procid.KernelThread(2) { // kthreadd, where this PID namespace shows it
		tests = append(tests, decideCase{"a kernel thread", row(t, 2, procid.Incarnation{}), reap.Keep, reap.KernelThread})
	}
	tests = append(tests, decideCase{"init", row(t, 1, procid.Incarnation{}), reap.Keep, reap.SelfOrAncestor})
	for _, tc := range tests {
		d := reap.Decide([]ledger.Row{tc.row})[0]
		if d.Action != tc.action || d.Reason != tc.reason {
			t.Errorf("%s: %s %s, want %s %s", tc.desc, d.Action, d.Reason, tc.action, tc.reason)
		}
	}
}
