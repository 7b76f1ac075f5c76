package caller

// Linux facts relied on:
//
//	getppid(2)            0 when the parent is outside the caller's PID namespace (the caller is
//	                      its PID 1, or entered it by setns); changes when the parent exits, to
//	                      the nearest subreaper or the namespace's init, before the parent is a
//	                      zombie (exit_notify reparents first)
//	pidfd_open(2)   5.3   ESRCH when no process has the PID; a pidfd names one process, not a PID
//	poll on a pidfd 5.3   POLLIN once the process has exited (a zombie has), child or not
//
// Without pidfd (authority.PidfdError), the watch polls: getppid for the parent, the start ticks
// for any other process, every pollEvery.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
)

// pollEvery is the fallback's period: how late, at most, it sees an end.
const pollEvery = 100 * time.Millisecond

// usePidfd reports whether the kernel offers the pidfd operations the watch needs (tests swap it).
var usePidfd = func() bool { return authority.PidfdError() == nil }

type sysProcess struct {
	pidfd *os.File      // nil in the fallback
	stop  chan struct{} // the fallback's: closed by close
}

// holdParent holds the parent: its end reparents custody, and getppid then names another process,
// which the fallback's poll sees without reading /proc.
func holdParent(ppid int) (*Process, error) {
	return hold(ppid, func(procid.ID) bool { return unix.Getppid() == ppid })
}

func open(pid int) (*Process, error) {
	return hold(pid, func(id procid.ID) bool {
		// Unknown (a read that failed otherwise) is not an end: missing proof is never death.
		err := id.Verify()
		return !errors.Is(err, procid.ErrGone) && !errors.Is(err, procid.ErrReused)
	})
}

// hold takes a handle on pid and proves through it that the process it names is alive and
// started no later than custody. alive is the fallback's test of the identity read, polled
// without a handle.
func hold(pid int, alive func(procid.ID) bool) (*Process, error) {
	if !usePidfd() {
		return holdPolled(pid, alive)
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err == unix.EINVAL { // before 5.10: no PIDFD_NONBLOCK
		if fd, err = unix.PidfdOpen(pid, 0); err == nil {
			err = unix.SetNonblock(fd, true)
		}
	}
	if err != nil {
		if fd > 0 {
			unix.Close(fd)
		}
		return nil, procid.SyscallError("pidfd_open", err)
	}
	f := os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid)) // non-blocking: on the runtime's poller
	if heldHook != nil {
		heldHook()
	}
	// Read after the open and found not exited after the read: the start read is the pidfd's
	// process's, not that of a process that took its PID between the open and the read.
	inc, err := procid.Read(pid)
	if err == nil && exited(f) {
		err = fmt.Errorf("pid %d exited: %w", pid, procid.ErrGone)
	}
	if err == nil {
		err = notLater(inc.ID)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	id := inc.ID
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { id.PidfdID, _ = procid.PidfdID(fd) })
	}
	p := &Process{id: id, done: make(chan struct{}), sys: sysProcess{pidfd: f}}
	go p.watch()
	return p, nil
}

// watch parks on the runtime poller until the pidfd turns readable, holding no thread.
func (p *Process) watch() {
	rc, err := p.sys.pidfd.SyscallConn()
	if err != nil {
		return
	}
	if rc.Read(func(fd uintptr) bool { return pollExited(fd) }) == nil {
		close(p.done)
	}
}

// holdPolled is hold without pidfd: the identity is read once, and the watch polls alive.
func holdPolled(pid int, alive func(procid.ID) bool) (*Process, error) {
	inc, err := procid.Read(pid)
	if err == nil {
		err = notLater(inc.ID)
	}
	if err != nil {
		return nil, err
	}
	p := &Process{id: inc.ID, done: make(chan struct{}), sys: sysProcess{stop: make(chan struct{})}}
	go func() {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for alive(p.id) {
			select {
			case <-p.sys.stop:
				return
			case <-t.C:
			}
		}
		close(p.done)
	}()
	return p, nil
}

func (s sysProcess) close() error {
	if s.pidfd != nil {
		return s.pidfd.Close() // wakes watch, whose Read then fails
	}
	close(s.stop)
	return nil
}

// exited reports whether the pidfd's process has exited.
func exited(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var ex bool
	rc.Control(func(fd uintptr) { ex = pollExited(fd) })
	return ex
}

// pollExited reports, without blocking, whether the pidfd's process has exited. A poll that fails
// (EBADF: the file is being closed) reports false: the watch then ends with the Read's error.
func pollExited(fd uintptr) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0
	}
}
