package scope_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// A grandchild whose parent died is reparented to the nearest subreaper, else to init. Some
// inits never reap (a container's or microVM's agent running as pid 1), and an unreaped zombie
// keeps its process group non-empty forever. So the test process makes itself the subreaper of
// its descendants and reaps, by pid, the orphans it knows of.
var subreaperErr = sync.OnceValue(func() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
})

func adoptOrphans(t *testing.T) {
	t.Helper()
	if err := subreaperErr(); err != nil {
		testproc.Skip(t, "cannot become a child subreaper to reap orphaned grandchildren: %v", err)
	}
}

// reapOrphan waits until pid is gone, reaping it once it was reparented to the test process.
// wait4 on a pid names only that process, and only if it is our child: never a stranger's.
func reapOrphan(t *testing.T, pid int) {
	t.Helper()
	testproc.WaitFor(t, 30*time.Second, func() error {
		got, err := unix.Wait4(pid, nil, unix.WNOHANG, nil)
		if got == pid || !procid.Exists(pid) {
			return nil
		}
		if err != nil && !errors.Is(err, unix.ECHILD) {
			return err
		}
		return fmt.Errorf("orphan %d not reaped yet", pid)
	})
}
