package procid

import "fmt"

// UIDs are the user ids a process runs as.
type UIDs struct {
	Real, Effective, Saved int
}

// Only reports whether every id is uid: the process runs as uid and as nobody else.
func (u UIDs) Only(uid int) bool { return u.Real == uid && u.Effective == uid && u.Saved == uid }

func (u UIDs) String() string {
	if u.Real == u.Effective && u.Real == u.Saved {
		return fmt.Sprintf("uid %d", u.Real)
	}
	return fmt.Sprintf("uid %d (effective %d, saved %d)", u.Real, u.Effective, u.Saved)
}

// Owner returns the user ids pid runs as now: Linux /proc/PID/status, macOS kinfo_proc. An error
// wraps [ErrGone] when no such process exists; elsewhere (Windows, which has no uids) it wraps
// errors.ErrUnsupported.
func Owner(pid int) (UIDs, error) {
	if pid <= 0 {
		return UIDs{}, fmt.Errorf("procid: owner of pid %d: %w", pid, ErrGone)
	}
	return owner(pid)
}

// KernelThread reports whether pid is a kernel thread (Linux: PF_KTHREAD in /proc/PID/stat; the
// System process, PID 4, on Windows; never elsewhere). A process that cannot be read is not
// reported as one: whatever acts on it next finds it gone or unreadable itself.
func KernelThread(pid int) bool { return kernelThread(pid) }
