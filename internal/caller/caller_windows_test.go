package caller_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/caller"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// The helpers only the Windows tests start: registered here, so that a run elsewhere does not
// report them unused.
func init() {
	// wait lives until its stdin, its lifeline, reads EOF.
	testproc.Register("wait", func([]string) int {
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
	// parent says "held <pid>" for the parent it holds, and waits like wait.
	testproc.Register("parent", func([]string) int {
		p, err := caller.Parent()
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("held", p.PID())
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
}

// TestParentAndOpen: a child holds this process as its parent; a process created after this one
// is refused as a reused PID; one that exited is refused.
func TestParentAndOpen(t *testing.T) {
	child := testproc.Start(t, testproc.Helper(t, "parent"))
	if held := child.Expect("held ", 30*time.Second)[0]; held != strconv.Itoa(os.Getpid()) {
		t.Errorf("the child holds %s as its parent, want %d", held, os.Getpid())
	}
	var later *testproc.Proc
	self, _ := procid.Self()
	testproc.WaitFor(t, 10*time.Second, func() error { // one created in this process's tick is not later
		later = testproc.Start(t, testproc.Helper(t, "wait"))
		inc, err := procid.Read(later.Process.Pid)
		if err != nil || inc.Start <= self.Start {
			later.Process.Kill()
			later.Wait()
			return errors.New("created in this process's clock tick")
		}
		return nil
	})
	if _, err := caller.Open(later.Process.Pid); !errors.Is(err, procid.ErrReused) {
		t.Errorf("Open of a process created after this one: %v; want ErrReused", err)
	}
	later.Stdin().Close()
	pid := later.Process.Pid
	later.Wait()
	if _, err := caller.Open(pid); err == nil {
		t.Errorf("Open of an exited process succeeded")
	}
}
