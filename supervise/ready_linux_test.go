package supervise_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

func init() {
	// unready-owner starts a child in a cgroup scope covered through a supervisor that is not
	// ready yet (held before its Init, see holdSupervisor), prints "ready <child pid>
	// <supervisor pid>", and blocks until its stdin closes.
	testproc.Register("unready-owner", func([]string) int {
		c := &supervise.Client{Grace: time.Second, StartTimeout: time.Hour}
		cmd := exec.Command("sleep", "1000")
		prep, err := scope.Prepare(cmd)
		if err == nil {
			err = c.Cover(prep.Desc())
		}
		if err == nil {
			err = cmd.Start()
		}
		if err == nil {
			_, err = prep.Attach()
		}
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ready", cmd.Process.Pid, c.PID())
		bufio.NewScanner(os.Stdin).Scan()
		return 0
	})
}

// The built-in supervisor on the cgroup path is not waited for: the owner covers and starts its
// child while the supervisor's runtime is still starting. An owner SIGKILLed then, before its
// supervisor has read a line, still has its child stopped: the supervisor, once it runs, reads
// the lines its dead owner left in the pipe before it acts on the death.
func TestOwnerKilledBeforeSupervisorReady(t *testing.T) {
	if kind, _, why := scope.Containment(); kind != scope.KindCgroup {
		requireCapability(t, "cgroup containment", why)
	}
	hold := filepath.Join(t.TempDir(), "go")
	owner := startHelper(t, "unready-owner", nil, helperOpts{stdout: true, env: []string{envHold + "=" + hold}})
	var childPID, supPID int
	if _, err := fmt.Sscanf(owner.line(30*time.Second), "ready %d %d", &childPID, &supPID); err != nil {
		t.Fatalf("owner's ready line: %v", err)
	}
	child, err := procid.Read(childPID)
	if err != nil {
		t.Fatal(err)
	}
	sup, err := procid.Read(supPID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(hold); err == nil {
		t.Fatal("the supervisor was released before the owner's death")
	}
	owner.cmd.Process.Signal(syscall.SIGKILL)
	owner.wait(30 * time.Second)
	if !present(child.ID) {
		t.Fatalf("the child %v ended with its owner, before its supervisor ran", child.ID)
	}
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testproc.WaitFor(t, 30*time.Second, func() error {
		reapOrphan(t, child.ID)
		reapOrphan(t, sup.ID)
		if present(child.ID) {
			return fmt.Errorf("the child %v outlives its dead owner's supervisor's start", child.ID)
		}
		if present(sup.ID) {
			return fmt.Errorf("the supervisor %v outlives its owner", sup.ID)
		}
		return nil
	})
}

// A built-in supervisor that is not ready within StartTimeout is a loss once it is known, as a
// death is: Start has returned nil, Notify is told, and another supervisor replaces it.
func TestSupervisorNotReadyIsALoss(t *testing.T) {
	if kind, _, why := scope.Containment(); kind != scope.KindCgroup {
		requireCapability(t, "cgroup containment", why)
	}
	hold := filepath.Join(t.TempDir(), "go")
	t.Setenv(envHold, hold)
	losses := make(chan error, 16)
	c := &supervise.Client{StartTimeout: 200 * time.Millisecond, IdleGrace: -1, Notify: func(lost error) {
		if lost != nil {
			select {
			case losses <- lost:
			default:
			}
		}
	}}
	defer func() {
		os.WriteFile(hold, nil, 0o600) // the held replacement goes on, reads the end of its pipe and exits
		c.Close()
	}()
	cmd := exec.Command("sleep", "1000")
	prep, err := scope.Prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cover(prep.Desc()); err != nil {
		t.Fatalf("Cover with a supervisor not ready yet: %v", err)
	}
	first := c.PID()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc, err := prep.Attach()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Uncover(prep.Desc())
		sc.Signal(syscall.SIGKILL)
		cmd.Wait()
		sc.Wait(context.Background())
		sc.Close()
	}()
	select {
	case lost := <-losses:
		if !strings.Contains(lost.Error(), "not ready after") {
			t.Errorf("the loss told: %v, want one naming the readiness", lost)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no loss told for a supervisor that never became ready")
	}
	testproc.WaitFor(t, 30*time.Second, func() error {
		if p := c.PID(); p == 0 || p == first {
			return fmt.Errorf("supervisor pid %d: not replaced (first %d)", p, first)
		}
		return nil
	})
}
