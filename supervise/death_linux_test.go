package supervise_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
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
	leak := leakID(t, o.call("leak"))
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

// leakID parses "leak <pid> <start>".
func leakID(tb testing.TB, lines []string) procid.ID {
	tb.Helper()
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "leak" {
			pid, _ := strconv.Atoi(f[1])
			start, _ := strconv.ParseUint(f[2], 10, 64)
			return procid.ID{PID: pid, Start: start}
		}
	}
	tb.Fatalf("no leak line in %q", lines)
	return procid.ID{}
}
