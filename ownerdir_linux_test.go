package custody_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.Register("ending-owner", helperEndingOwner) }

// TestOwnerDirGoesWithOwner: an owner's cgroup directory, empty once its child has ended, is
// removed however the owner ends: by Close while it lives, and by its supervisor, which covers
// nothing by then, when it exits without Close or is SIGKILLed. The owner is a helper process:
// the directory is the whole process's, and other tests' owners in this one hold scopes in it.
func TestOwnerDirGoesWithOwner(t *testing.T) {
	requireCgroups(t)
	for _, end := range []string{"close", "exit", "kill"} {
		t.Run("end="+end, func(t *testing.T) { ownerDirGoes(t, end) })
	}
}

func ownerDirGoes(t *testing.T, end string) {
	owner := testproc.Start(t, testproc.Helper(t, "ending-owner", ledgerPath(t), end))
	f := owner.Expect("ready", 20*time.Second)
	if len(f) != 1 {
		t.Fatalf("ready line %q", f)
	}
	dir := filepath.Dir(cgroupDir(t, f[0]))
	switch end {
	case "close":
		owner.Expect("closed", 20*time.Second)
		requireGone(t, dir) // the owner still runs: Close removed it
		return
	case "exit":
		if _, err := io.WriteString(owner.Stdin(), "exit\n"); err != nil {
			t.Fatal(err)
		}
	case "kill":
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("the live owner's directory: %v", err)
		}
		owner.Process.Signal(syscall.SIGKILL)
	}
	owner.Wait()
	testproc.WaitFor(t, 10*time.Second, func() error {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the dead owner's cgroup directory %s is still there (%v)", dir, err)
		}
		return nil
	})
}

// helperEndingOwner starts a child and stops it, with a supervisor kept while it covers nothing,
// prints "ready <the child's cgroup>", and ends as args[1] says: "close" closes the owner and
// prints "closed", then waits; "exit" exits without Close at a line on its standard input; "kill"
// waits to be killed.
func helperEndingOwner(args []string) int {
	ctx := context.Background()
	sup := &supervise.Client{Grace: time.Second, IdleGrace: -1}
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: sup}
	c, err := o.Start(ctx, exec.Command("sleep", "60"), custody.StartOptions{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	cg, err := rowCgroupOf(o.Ledger, c.ID.PID)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if res := c.Stop(ctx, stop.Options{Grace: time.Second}); res.Outcome != stop.Exited {
		fmt.Println("error stop:", res.Outcome, res.Reason)
		return 1
	}
	fmt.Println("ready", cg)
	switch args[1] {
	case "close":
		if err := o.Close(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("closed")
	case "exit":
		bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}
	select {}
}
