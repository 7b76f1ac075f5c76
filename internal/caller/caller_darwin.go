package caller

// macOS facts relied on (kqueue(2)):
//
//	EVFILT_PROC NOTE_EXIT   registration fails with ESRCH when no process has the PID; the event
//	                        fires once the process exits, whoever its parent is (a zombie
//	                        registered reads as gone in the identity read that follows)
//	getppid(2)              changes when the parent exits (custody is reparented to launchd)
//
// The kqueue also watches a pipe's read end, which Close makes readable by closing the write end:
// the one thread parked in kevent(2) wakes, and only then are the descriptors closed.

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/procid"
)

type sysProcess struct {
	kq, r, w int
	ended    chan struct{} // closed when the watch's thread has left kevent
}

func holdParent(ppid int) (*Process, error) { return hold(ppid) }

func open(pid int) (*Process, error) { return hold(pid) }

// hold registers NOTE_EXIT on pid, then reads its identity, then checks that no exit is pending:
// the identity read is then that of the process registered.
func hold(pid int) (_ *Process, err error) {
	s := sysProcess{kq: -1, r: -1, w: -1, ended: make(chan struct{})}
	defer func() {
		if err != nil {
			s.closeFDs()
		}
	}()
	if s.kq, err = unix.Kqueue(); err != nil {
		return nil, os.NewSyscallError("kqueue", err)
	}
	unix.CloseOnExec(s.kq)
	var fds [2]int
	if err = unix.Pipe(fds[:]); err != nil {
		return nil, os.NewSyscallError("pipe", err)
	}
	s.r, s.w = fds[0], fds[1]
	unix.CloseOnExec(s.r)
	unix.CloseOnExec(s.w)
	wake := unix.Kevent_t{Ident: uint64(s.r), Filter: unix.EVFILT_READ, Flags: unix.EV_ADD}
	if _, err = unix.Kevent(s.kq, []unix.Kevent_t{wake}, nil, nil); err != nil {
		return nil, os.NewSyscallError("kevent", err)
	}
	exit := unix.Kevent_t{Ident: uint64(pid), Filter: unix.EVFILT_PROC, Flags: unix.EV_ADD | unix.EV_ONESHOT, Fflags: unix.NOTE_EXIT}
	if _, err = unix.Kevent(s.kq, []unix.Kevent_t{exit}, nil, nil); err != nil {
		return nil, procid.SyscallError("kevent", err) // ESRCH wraps procid.ErrGone
	}
	if heldHook != nil {
		heldHook()
	}
	inc, err := procid.Read(pid)
	if err != nil {
		return nil, err
	}
	if s.exitPending() {
		return nil, fmt.Errorf("pid %d exited: %w", pid, procid.ErrGone)
	}
	if err = notLater(inc.ID); err != nil {
		return nil, err
	}
	p := &Process{id: inc.ID, done: make(chan struct{}), sys: s}
	go p.watch()
	return p, nil
}

// exitPending reports whether the process's exit has been queued already.
func (s sysProcess) exitPending() bool {
	ev := make([]unix.Kevent_t, 2)
	n, err := unix.Kevent(s.kq, nil, ev, &unix.Timespec{})
	for i := range max(n, 0) {
		if err == nil && ev[i].Filter == unix.EVFILT_PROC {
			return true
		}
	}
	return false
}

// watch parks one thread in kevent until the exit or the wake.
func (p *Process) watch() {
	defer close(p.sys.ended)
	ev := make([]unix.Kevent_t, 1)
	for {
		n, err := unix.Kevent(p.sys.kq, nil, ev, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 || ev[0].Filter != unix.EVFILT_PROC {
			return // the wake, or a kqueue that failed: the end is not known
		}
		close(p.done)
		return
	}
}

func (s sysProcess) close() error {
	unix.Close(s.w) // wakes the watch
	<-s.ended
	unix.Close(s.kq)
	unix.Close(s.r)
	return nil
}

func (s sysProcess) closeFDs() {
	for _, fd := range []int{s.kq, s.r, s.w} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
