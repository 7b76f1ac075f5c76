package supervise_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
)

// TestOwnerDeathBeforeEOF: the supervisor stops its owner's scopes when the owner begins to die,
// not when the owner's files close. The owner hands a copy of the supervisor's pipe to a process
// it does not cover, so that the pipe's end never comes while that process lives; after the
// owner's SIGKILL the covered processes must be gone all the same, while the pipe is still open,
// and the supervisor must end once the grace has passed.
func TestOwnerDeathBeforeEOF(t *testing.T) {
	requireCapability(t, "subreaper", reaperErr)
	const grace = time.Second
	life := newLifeline(t)
	o := startOwner(t, life, "-grace", grace.String())
	ids := readyIDs(t, o.call("spawn child 1 -grandchild"))
	ids = append(ids, readyIDs(t, o.call("spawn child 1 -ignore-term"))...)
	sup := supID(t, o.call("sup"))
	leak := namedID(t, o.call("leak"), "leak")
	pidfd, err := unix.PidfdOpen(leak.PID, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		unix.Close(pidfd)
		settle(t, leak)
	})
	if err := leak.Verify(); err != nil { // the pidfd is the cat's: its PID was still its own
		t.Fatal(err)
	}
	o.cmd.Process.Kill()
	o.wait(5 * time.Second)
	testproc.WaitFor(t, grace+time.Second, func() error { return allGone(ids...) })
	if !alive(leak) {
		t.Fatalf("%v, which holds the supervisor's pipe open, is gone: the test proves nothing", leak)
	}
	testproc.WaitFor(t, grace+5*time.Second, func() error { return allGone(sup) })
	settle(t, append(ids, sup)...)
}
