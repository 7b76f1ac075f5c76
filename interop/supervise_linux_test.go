package interop_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// owner is Hermes owning children through spawn_owned, with custody as its supervisor: the
// module's supervisor command, "<sh> <script> <pgid>", becomes "<this binary> supervise <pgid>",
// which the custody helper runs as `custody supervise <pgid>`. It prints the owned child's pid,
// a grandchild's in the same group, and the supervisor's, then waits on its input.
const owner = `
pi._POSIX_SH = sys.argv[1]
pi._SUPERVISOR_SCRIPT = Path("supervise")
proc = pi.spawn_owned(["sh", "-c", "sleep 1000 & echo $!; exec sleep 1000"], purpose="serve",
                      stdout=subprocess.PIPE, text=True)
grandchild = proc.stdout.readline().strip()
print(proc.pid, grandchild, pi._supervisor.pid, flush=True)
sys.stdin.read()
`

// TestSpawnOwnedDiesWithOwner: Hermes's spawn_owned with custody as its supervisor; when the
// owner is SIGKILLed, its owned child and the child's whole group die.
func TestSpawnOwnedDiesWithOwner(t *testing.T) {
	h := newHermes(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := h.cmd(owner, exe)
	cmd.Env = append(cmd.Env, testproc.Env("custody"))
	p := testproc.Start(t, cmd)
	f := strings.Fields(p.Line(30 * time.Second))
	if len(f) != 3 {
		t.Fatalf("owner said %q", f)
	}
	var ids []procid.ID
	for _, s := range f {
		pid, _ := strconv.Atoi(s)
		inc, err := procid.Read(pid)
		if err != nil {
			t.Fatalf("pid %s: %v", s, err)
		}
		ids = append(ids, inc.ID)
	}
	child, grandchild, sup := ids[0], ids[1], ids[2]
	t.Cleanup(func() { killGroupIfLeader(child) })
	supCmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", sup.PID))
	if !strings.Contains(string(supCmdline), "supervise\x00") {
		t.Fatalf("the supervisor runs %q, not custody supervise", supCmdline)
	}
	testproc.WaitFor(t, 10*time.Second, func() error { // the register line reached it
		inc, err := procid.Read(child.PID)
		if err != nil || inc.PGID != child.PID {
			return fmt.Errorf("child %v not yet leading its group: %v", child, err)
		}
		return nil
	})
	// The owner's group registration is a pipe write the owner made before printing; its death
	// closes the pipe after it, so the supervisor reads the line before the EOF.
	if err := p.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	testproc.WaitFor(t, 30*time.Second, func() error {
		for _, id := range []procid.ID{child, grandchild, sup} {
			if id.Verify() == nil {
				return fmt.Errorf("%v still runs after the owner's SIGKILL", id)
			}
		}
		return nil
	})
}

// killGroupIfLeader ends what a failed test left of the owned group: only while its leader is
// still the incarnation the test saw (never a group that took the number since).
func killGroupIfLeader(leader procid.ID) {
	if leader.Verify() == nil {
		syscall.Kill(-leader.PID, syscall.SIGKILL)
	}
}
