package custody_test

import (
	"bufio"
	"context"
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
// nothing by then, when it exits without Close or is SIGKILLed. With end=handed the owner has
// also handed a child over, which its receiver has stopped: Close removes the directory all the
// same. The owner is a helper process: the directory is the whole process's, and other tests'
// owners in this one hold scopes in it.
func TestOwnerDirGoesWithOwner(t *testing.T) {
	requireCgroups(t)
	for _, end := range []string{"close", "exit", "kill", "handed"} {
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
	case "close", "handed":
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
	awaitGone(t, dir) // the dead owner's, by its supervisor
}

// helperEndingOwner starts a child and stops it, with a supervisor kept while it covers nothing,
// prints "ready <the child's cgroup>", and ends as args[1] says: "close" closes the owner and
// prints "closed", then waits; "handed" does the same, having first handed a second child to
// another owner in this process, which stopped it (see handOver); "exit" exits without Close at a
// line on its standard input; "kill" waits to be killed.
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
	if args[1] == "handed" {
		if err := handOver(ctx, o); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	if res := c.Stop(ctx, stop.Options{Grace: time.Second}); res.Outcome != stop.Exited {
		fmt.Println("error stop:", res.Outcome, res.Reason)
		return 1
	}
	fmt.Println("ready", cg)
	switch args[1] {
	case "close", "handed":
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

// handOver starts a second child of o (after which o keeps a reserved cgroup beside the first
// child's), grants it to another owner of the same ledger in this process, which adopts it,
// stops it (removing its cgroup) and closes.
func handOver(ctx context.Context, o *custody.Owner) error {
	c, err := o.Start(ctx, exec.Command("sleep", "60"), custody.StartOptions{})
	if err != nil {
		return err
	}
	g, err := c.Grant(custody.GrantOptions{})
	if err != nil {
		return err
	}
	r := &custody.Owner{Ledger: o.Ledger, Supervisor: &supervise.Client{Grace: time.Second}}
	adopted, err := r.Adopt(ctx, g.String())
	if err != nil {
		return err
	}
	if res := adopted.Stop(ctx, stop.Options{Grace: time.Second}); res.Outcome != stop.Exited {
		return fmt.Errorf("stop the adopted child: %s %s", res.Outcome, res.Reason)
	}
	return r.Close()
}
