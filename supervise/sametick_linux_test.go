package supervise_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.Register("pidns-same-tick", helperPIDNSSameTick) }

// TestSameTickLeader: in a PID namespace, a group leader A is killed and a stranger B is made to
// take its PID, and lead a group with its id, within the tick A started in (asserted). A
// registration of A's group with A's start and pidfs id that arrives now (as a replay to a
// restarted supervisor does) is refused, and the owner's death that follows signals nothing: B
// lives. By start alone, the registration would have bound B's group. And a supervisor that
// covered A's group while A lived (registered with A's start alone, as the legacy and the Hermes
// owner's lines are) signals nothing at the owner's death either: it holds A's group through a
// pidfd on A, which the kernel resolves to A's own, now empty, group, never to B's.
func TestSameTickLeader(t *testing.T) {
	testproc.RequireRoot(t)
	if err := procid.PidfsError(); err != nil {
		testproc.Skip(t, "skipping: pidfs ids unavailable: %v", err)
	}
	cmd := testproc.Helper(t, "pidns-same-tick")
	testproc.NewPIDNamespace(cmd)
	p := testproc.Start(t, cmd)
	f := p.Expect("result ", 120*time.Second)
	if f[0] != "ok" {
		t.Fatalf("in the PID namespace: %s", strings.Join(f, " "))
	}
	t.Logf("same-tick reuse: %s", strings.Join(f[1:], " "))
}

// helperPIDNSSameTick runs as PID 1 of a new PID namespace.
func helperPIDNSSameTick([]string) int {
	result := func(format string, a ...any) int {
		fmt.Printf("result "+format+"\n", a...)
		return 0
	}
	if err := testproc.MountProc(); err != nil {
		return result("mount proc: %v", err)
	}
	start := func(stdin *os.File) (*exec.Cmd, int, error) {
		c := exec.Command("cat")
		c.Stdin = stdin
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return nil, 0, err
		}
		return c, c.Process.Pid, nil
	}
	end := func(c *exec.Cmd) { c.Process.Kill(); c.Wait() }
	var incA procid.Incarnation
	var log bytes.Buffer
	cfg := supervise.Config{Grace: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	var sweepA, releaseA func() // a supervisor's cover of A's group, registered while A lived
	victim := func() (int, uint64, func(), error) {
		if releaseA != nil {
			releaseA() // a try whose stranger missed the tick
		}
		r, w, err := os.Pipe() // A blocks reading it until killed
		if err != nil {
			return 0, 0, nil, err
		}
		defer r.Close()
		a, pid, err := start(r)
		if err != nil {
			w.Close()
			return 0, 0, nil, err
		}
		incA, err = procid.ReadExact(pid)
		var pinned bool
		pinned, sweepA, releaseA = supervise.Bound(cfg, fmt.Sprintf("register %d %d %d", pid, pid, incA.Start))
		if err == nil && !pinned {
			err = fmt.Errorf("the registration of live leader %v was not pinned", incA.ID)
		}
		return pid, incA.Start, func() { end(a); w.Close() }, err
	}
	tick := func(pid int) (uint64, error) {
		inc, err := procid.Read(pid)
		return inc.Start, err
	}
	b, tries, err := testproc.ReuseWithinTick(500, victim, func() (*exec.Cmd, int, error) { return start(os.Stdin) }, end, tick)
	if err != nil {
		return result("%v", err)
	}
	defer end(b)
	incB, err := procid.ReadExact(b.Process.Pid)
	switch {
	case err != nil:
		return result("read B: %v", err)
	case incB.PID != incA.PID || incB.Start != incA.Start || incB.PGID != incA.PID:
		return result("B %v (group %d) does not share A's pid, group and tick %v", incB.ID, incB.PGID, incA.ID)
	case incB.PidfdID == incA.PidfdID || incA.PidfdID == 0:
		return result("pidfs ids: A %d, B %d", incA.PidfdID, incB.PidfdID)
	}
	sweepA() // the owner of the cover taken while A lived dies
	releaseA()
	if inc, err := procid.ReadExact(b.Process.Pid); err != nil || inc.PidfdID != incB.PidfdID {
		return result("the stranger did not survive the death of the owner that covered A: %v", err)
	}
	line := fmt.Sprintf("register %d %d %d %d\n", incA.PID, incA.PID, incA.Start, incA.PidfdID)
	if err := supervise.Serve(context.Background(), strings.NewReader(line), cfg); err != nil {
		return result("serve: %v", err)
	}
	if !strings.Contains(log.String(), "leader pid names another process") {
		return result("the registration was not refused: %q", log.String())
	}
	if inc, err := procid.ReadExact(b.Process.Pid); err != nil || inc.PidfdID != incB.PidfdID {
		return result("the stranger did not survive: %v", err)
	}
	return result("ok pid %d tick %d after %d tries: pidfs ids %d (registered) and %d (stranger)",
		incA.PID, incA.Start, tries, incA.PidfdID, incB.PidfdID)
}
