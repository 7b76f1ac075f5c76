package authority

// Linux pidfd facts relied on (see also GOROOT/src/os/pidfd_linux.go):
//
//	pidfd_send_signal(2)   5.1   signal through the fd; ESRCH once the process has exited
//	pidfd_open(2)          5.3   fd is close-on-exec; ESRCH when no process has the PID; works on
//	                             any process in the caller's PID namespace, whoever owns it
//	poll/epoll on a pidfd  5.3   readable (POLLIN) once the process has exited, child or not;
//	                             6.9+ adds POLLHUP once it has been reaped
//	O_NONBLOCK on a pidfd        affects only waitid(P_PIDFD), which custody does not use; it is
//	                             set so that os.NewFile registers the fd with the runtime poller
//
// A pidfd pins a process, not a PID: the number is free for reuse once the process is reaped,
// but the fd keeps naming the process it was opened on. That is why an open followed by a
// proof is authority, and a PID alone is not.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/custody-dev/custody/internal/eintr"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

var pidfdErr = sync.OnceValue(probePidfd)

func pidfdWorks() bool { return pidfdErr() == nil }

func pidfdError() error { return pidfdErr() }

// probePidfd exercises every pidfd operation custody uses on the calling process itself.
func probePidfd() error {
	f, err := openPidfd(os.Getpid())
	if err != nil {
		return fmt.Errorf("authority: probe pidfd: %w", err)
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("authority: probe pidfd: %w", err)
	}
	var sigErr, pollErr error
	var exited bool
	err = rc.Control(func(fd uintptr) {
		sigErr = unix.PidfdSendSignal(int(fd), 0, nil, 0)
		exited, pollErr = pollExited(fd)
	})
	switch {
	case err != nil:
		return fmt.Errorf("authority: probe pidfd: %w", err)
	case sigErr != nil:
		return fmt.Errorf("authority: probe pidfd: %w", os.NewSyscallError("pidfd_send_signal", sigErr))
	case pollErr != nil:
		return fmt.Errorf("authority: probe pidfd: %w", pollErr)
	case exited:
		return errors.New("authority: probe pidfd: poll reports the calling process as exited")
	}
	// Wait parks on the runtime poller; a pidfd epoll refused would leave it nothing to wait on.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("authority: probe pidfd: epoll: %w", err)
	}
	return nil
}

// openPidfd opens a pidfd on pid as a pollable *os.File. The File's reference counting is what
// keeps a concurrent Close from turning a signal through the fd number into a signal through a
// recycled fd number.
func openPidfd(pid int) (*os.File, error) {
	fd, err := pidfdOpen(pid)
	if err != nil {
		return nil, procid.SyscallError("pidfd_open", err)
	}
	return newPidfdFile(fd, pid)
}

// pidfdOpen opens a non-blocking pidfd, as the runtime's poller needs it: at once with
// PIDFD_NONBLOCK (Linux 5.10), or else made non-blocking afterwards. Each pidfd a stop or a
// start takes would otherwise cost two fcntl calls.
func pidfdOpen(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != unix.EINVAL {
		return fd, err
	}
	if fd, err = unix.PidfdOpen(pid, 0); err != nil {
		return -1, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// newPidfdFile wraps a pidfd opened by pidfdOpen; os.NewFile sees it non-blocking and registers
// it with the runtime's poller.
func newPidfdFile(fd, pid int) (*os.File, error) {
	return os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid)), nil
}

// pollExited reports, without blocking, whether the process behind a pidfd has exited.
func pollExited(fd uintptr) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := eintr.Retry(func() (int, error) { return unix.Poll(fds, 0) })
	switch {
	case err != nil:
		return false, os.NewSyscallError("poll", err)
	case n == 0:
		return false, nil
	case fds[0].Revents&unix.POLLNVAL != 0:
		return false, os.NewSyscallError("poll", unix.EBADF)
	}
	return fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0, nil
}
