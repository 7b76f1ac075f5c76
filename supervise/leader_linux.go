package supervise

import (
	"sync/atomic"

	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// groupSignalBroken is set once the kernel refuses PIDFD_SIGNAL_PROCESS_GROUP (before Linux
// 6.9): from then on groups are signalled by id after a fresh identity check.
var groupSignalBroken atomic.Bool

// openLeader opens a pidfd on pid, or returns -1 when none can be had (no pidfd support, no
// descriptor left, no such process). It proves nothing yet: see [provenLeader].
func openLeader(pid int) int {
	if groupSignalBroken.Load() {
		return -1
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	return fd
}

// provenLeader keeps fd, opened before the leader's incarnation was read, when the process it
// names is still alive: the PID cannot have changed hands between the open and the read, so the
// pidfd names the incarnation read. Otherwise it closes fd and returns -1.
func provenLeader(fd int) int {
	if fd >= 0 && unix.PidfdSendSignal(fd, 0, nil, 0) != nil {
		unix.Close(fd)
		return -1
	}
	return fd
}

func closeLeader(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// signalByLeader sends sig to the process group whose leader fd names, through the pidfd
// (PIDFD_SIGNAL_PROCESS_GROUP): the kernel resolves the group from the leader's struct pid, so
// the signal reaches exactly the registered group, even after the leader has exited, and nothing
// else whatever has happened to the number since. No identity check is needed, and none is made:
// that is the point. ok is false when it could not be tried (no pidfd, or a kernel without the
// flag); err is then nil and the caller falls back. ESRCH means the group has no process left.
func signalByLeader(fd int, sig unix.Signal) (ok bool, err error) {
	if fd < 0 || groupSignalBroken.Load() {
		return false, nil
	}
	err = unix.PidfdSendSignal(fd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	if err == unix.EINVAL { // sig is valid: the flag is what this kernel does not know
		groupSignalBroken.Store(true)
		return false, nil
	}
	return true, err
}

// leaderID returns the pidfs id of the process fd names (Linux 6.9+); ok is false when there is
// no fd or no id to be had, and the start alone then decides.
func leaderID(fd int) (id uint64, ok bool) {
	if fd < 0 {
		return 0, false
	}
	id, err := procid.PidfdID(uintptr(fd))
	return id, err == nil
}
