package supervise_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

func init() {
	// prepared-owner starts its supervisor, then makes a child's cgroup (scope.Prepare) that it
	// never covers nor starts, as an owner killed between the two does, prints "ready <the
	// owner directory's path> <supervisor pid>", and blocks until its stdin closes.
	testproc.Register("prepared-owner", func([]string) int {
		c := &supervise.Client{Grace: time.Second}
		if err := c.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		if _, err := scope.Prepare(exec.Command("true")); err != nil {
			fmt.Println("error", err)
			return 1
		}
		_, where, _ := scope.Containment()
		fmt.Println("ready", filepath.Join(where, filepath.Base(scope.OwnerDir())), c.PID())
		bufio.NewScanner(os.Stdin).Scan()
		return 0
	})
}

// An owner killed after it made its cgroup directory, and before it covered any cgroup there,
// leaves nothing: its supervisor, told the directory at its start, removes it.
func TestOwnerDirRemovedBySupervisor(t *testing.T) {
	if kind, _, why := scope.Containment(); kind != scope.KindCgroup {
		requireCapability(t, "cgroup containment", why)
	}
	owner := startHelper(t, "prepared-owner", nil, helperOpts{stdout: true})
	var dir string
	var supPID int
	if _, err := fmt.Sscanf(owner.line(30*time.Second), "ready %s %d", &dir, &supPID); err != nil {
		t.Fatalf("owner's ready line: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "s1")); err != nil {
		t.Fatalf("the owner's prepared cgroup: %v", err)
	}
	sup, err := procid.Read(supPID)
	if err != nil {
		t.Fatal(err)
	}
	owner.cmd.Process.Signal(syscall.SIGKILL)
	owner.wait(30 * time.Second)
	testproc.WaitFor(t, 30*time.Second, func() error {
		reapOrphan(t, sup.ID)
		if present(sup.ID) {
			return fmt.Errorf("the supervisor %v outlives its owner", sup.ID)
		}
		return nil
	})
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead owner's directory %s after its supervisor's end: %v", dir, err)
		os.Remove(filepath.Join(dir, "s1"))
		os.Remove(dir)
	}
}
