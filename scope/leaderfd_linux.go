package scope

// A process group's leader, held by a pidfd. Kernel facts relied on:
//
//	pidfd_open(2)                 5.3   ESRCH when no process has the PID; a zombie can be opened
//	poll on a pidfd               5.3   readable (POLLIN) once the process has exited
//	PIDFD_SIGNAL_PROCESS_GROUP    6.9   pidfd_send_signal(2) to the group whose id is the fd's
//	                                    struct pid, found through that struct pid, not by number:
//	                                    the group the leader made, even after the leader exited or
//	                                    moved, and never another group that reused the number;
//	                                    ESRCH when it has no member left; EINVAL before 6.9
//	a pidfd                             pins a struct pid, not a number: the number is free once
//	                                    nothing uses it, but the fd goes on naming the process it
//	                                    was opened on; a group's members keep the number in use
//
// So an open followed by a proof (the PID still names the recorded incarnation, and the process
// the fd names is still alive after that was read) is authority over the group for as long as
// the fd is held.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/custody-dev/custody/internal/eintr"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// groupSignalBroken is set once the kernel refuses PIDFD_SIGNAL_PROCESS_GROUP (before Linux 6.9):
// from then on groups are signalled by number after a fresh check of the rule.
var groupSignalBroken atomic.Bool

var groupSignalErr = sync.OnceValue(probeGroupSignal)

func groupSignalWorks() bool { return !groupSignalBroken.Load() && groupSignalErr() == nil }

func groupSignalError() error {
	if err := groupSignalErr(); err != nil {
		return err
	}
	if groupSignalBroken.Load() {
		return fmt.Errorf("scope: group signal through a pidfd: %w", errGroupSignal)
	}
	return nil
}

// probeGroupSignal sends signal 0, which only checks, to the group the calling process's own pid
// names, through a pidfd on it, with PIDFD_SIGNAL_PROCESS_GROUP. The kernel checks the flag before
// it looks for the group: ESRCH (the caller leads no group) and EPERM mean the flag is known.
func probeGroupSignal() error {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("scope: probe group signal: %w", os.NewSyscallError("pidfd_open", err))
	}
	defer unix.Close(fd)
	switch err := unix.PidfdSendSignal(fd, 0, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP); err {
	case nil, unix.ESRCH, unix.EPERM:
		return nil
	case unix.EINVAL:
		return fmt.Errorf("scope: probe group signal: PIDFD_SIGNAL_PROCESS_GROUP is Linux 6.9+: %w", errGroupSignal)
	default:
		return fmt.Errorf("scope: probe group signal: %w", os.NewSyscallError("pidfd_send_signal", err))
	}
}

// openLeader opens a pidfd on pid, or returns -1 when none can be had (no pidfd support, no
// descriptor left, no such process). It proves nothing yet: see provenLeader.
func openLeader(pid int) int {
	if !groupSignalWorks() {
		return -1
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	return fd
}

// pinLeader opens a pidfd on the recorded leader and keeps it only when it proves to name the
// recorded incarnation: by pidfs id where the record has one and the kernel gives them, else by
// start and liveness (see provenLeader). A leader without a recorded start or id, or one that is
// gone, is not pinned: -1.
func pinLeader(leader procid.ID) int {
	byID := leader.PidfdID != 0 && procid.PidfsError() == nil
	if !byID && leader.Start == 0 {
		return -1
	}
	fd := openLeader(leader.PID)
	if fd < 0 {
		return -1
	}
	if byID {
		if id, ok := leaderID(fd); ok && id == leader.PidfdID {
			return fd
		}
		closeLeader(fd)
		return -1
	}
	if inc, err := procid.Read(leader.PID); err != nil || inc.Start != leader.Start {
		closeLeader(fd)
		return -1
	}
	return provenLeader(fd)
}

// provenLeader keeps fd, opened before the leader's incarnation was read, when the process it
// names has still not exited: the PID cannot have changed hands between the open and the read,
// so the pidfd names the incarnation read. Otherwise it closes fd and returns -1. It asks poll,
// not signal 0, which another user's process would refuse (EPERM) though it lives.
func provenLeader(fd int) int {
	if fd >= 0 && !leaderRuns(fd) {
		unix.Close(fd)
		return -1
	}
	return fd
}

// takeLeader duplicates the pidfd Go took at spawn (SysProcAttr.PidFD, kept in os.Process): it
// names the child from its birth, so it needs no proof. -1 when p holds none.
func takeLeader(p *os.Process) int {
	if !groupSignalWorks() {
		return -1
	}
	fd := -1
	p.WithHandle(func(h uintptr) {
		if d, err := unix.FcntlInt(h, unix.F_DUPFD_CLOEXEC, 0); err == nil {
			fd = d
		}
	})
	return fd
}

func closeLeader(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// signalByLeader sends sig to the group the leader fd names leads (see the table above). It
// returns the raw errno: nil, ESRCH when the group has no process left, EPERM; or an error
// wrapping errors.ErrUnsupported when this kernel lacks the flag, and remembers that.
func signalByLeader(fd int, sig unix.Signal) error {
	err := unix.PidfdSendSignal(fd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	if err == unix.EINVAL { // sig is valid: the flag is what this kernel does not know
		groupSignalBroken.Store(true)
		return errGroupSignal
	}
	return err
}

var errGroupSignal = errors.Join(errors.ErrUnsupported, os.NewSyscallError("pidfd_send_signal", unix.EINVAL))

// leaderExited reports whether the process fd names has provably exited (a zombie, or reaped);
// leaderRuns whether it provably has not. A failed poll proves neither.
func leaderExited(fd int) bool { n, err := pollLeader(fd); return err == nil && n > 0 }

func leaderRuns(fd int) bool { n, err := pollLeader(fd); return err == nil && n == 0 }

func pollLeader(fd int) (int, error) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	return eintr.Retry(func() (int, error) { return unix.Poll(pfd, 0) })
}

// leaderID returns the pidfs id of the process fd names (Linux 6.9+); ok is false when there is
// no fd or no id to be had.
func leaderID(fd int) (id uint64, ok bool) {
	if fd < 0 {
		return 0, false
	}
	id, err := procid.PidfdID(uintptr(fd))
	return id, err == nil
}
