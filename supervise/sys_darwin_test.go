package supervise_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// lastResort: macOS has no parent-death signal.
func lastResort(attr *syscall.SysProcAttr) {}

// becomeReaper: macOS has no subreaper; launchd adopts and reaps orphans.
func becomeReaper() error { return nil }

// reapOrphan: orphans belong to launchd, which reaps them.
func reapOrphan(tb testing.TB, id procid.ID) {}

// zombie reports whether id's process is a zombie now (p_stat SZOMB).
func zombie(id procid.ID) bool {
	kp, ok := kinfo(id)
	return ok && kp.Proc.P_stat == 5
}

// present reports whether id's process exists now in any state, zombie included.
func present(id procid.ID) bool {
	_, ok := kinfo(id)
	return ok
}

func kinfo(id procid.ID) (*unix.KinfoProc, bool) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", id.PID)
	if err != nil || kp.Proc.P_pid != int32(id.PID) {
		return nil, false
	}
	tv := kp.Proc.P_starttime
	return kp, uint64(tv.Sec)*1_000_000+uint64(tv.Usec) == id.Start
}

// rss is not read on macOS (no /proc); the benchmark that needs it skips.
func rss(pid int) (int, error) { return 0, errors.ErrUnsupported }

// anonymous is not read on macOS either.
func anonymous(pid int) (int, error) { return 0, errors.ErrUnsupported }

// peakRSS is not read on macOS either.
func peakRSS(pid int) (int, error) { return 0, errors.ErrUnsupported }

// watcher polls identities: macOS has no pidfd (kqueue's EVFILT_PROC would do; polling is
// enough for correctness, not for microsecond figures).
type watcher struct{ ids []procid.ID }

func watch(tb testing.TB, ids []procid.ID) *watcher { return &watcher{ids: ids} }

func (w *watcher) wait(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := allGone(w.ids...)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(time.Millisecond)
	}
}
