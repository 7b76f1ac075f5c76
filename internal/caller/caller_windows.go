package caller

// Windows facts relied on:
//
//	NtQueryInformationProcess InheritedFromUniqueProcessId   the creator's PID, never updated when
//	                          the creator exits (Windows does not reparent): it may name a
//	                          recycled PID, which a creation time later than custody's gives away
//	OpenProcess(SYNCHRONIZE|PROCESS_QUERY_LIMITED_INFORMATION)   the handle keeps naming that one
//	                          process, and its PID unreused, while it is open
//	WaitForSingleObject(h, 0) → WAIT_OBJECT_0                     the process has exited
//
// The watch waits on the process handle and on an event that Close sets, on one thread.

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"

	"github.com/custody-dev/custody/internal/winproc"
	"github.com/custody-dev/custody/procid"
)

type sysProcess struct {
	h, wake windows.Handle
	ended   chan struct{} // closed when the watch's thread has left its wait
}

func parent() (*Process, error) {
	self, err := procid.Self()
	if err != nil {
		return nil, err
	}
	if self.PPID == 0 {
		return nil, ErrNoParent
	}
	return hold(self.PPID)
}

func open(pid int) (*Process, error) { return hold(pid) }

// hold opens pid, then proves through the handle that it has not exited and was created no later
// than custody.
func hold(pid int) (_ *Process, err error) {
	h, _, err := winproc.Open(pid, windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, 0)
	if errors.Is(err, winproc.ErrNoProcess) {
		return nil, fmt.Errorf("%w: %w", err, procid.ErrGone)
	}
	if err != nil {
		return nil, err
	}
	s := sysProcess{h: h, ended: make(chan struct{})}
	defer func() {
		if err != nil {
			windows.CloseHandle(s.h)
			if s.wake != 0 {
				windows.CloseHandle(s.wake)
			}
		}
	}()
	if heldHook != nil {
		heldHook()
	}
	ev, err := windows.WaitForSingleObject(h, 0)
	if err != nil {
		return nil, os.NewSyscallError("WaitForSingleObject", err)
	}
	if ev == windows.WAIT_OBJECT_0 {
		return nil, fmt.Errorf("pid %d exited: %w", pid, procid.ErrGone)
	}
	start, err := winproc.Start(h)
	if err != nil {
		return nil, err
	}
	id := procid.ID{PID: pid, Start: start}
	if err = notLater(id); err != nil {
		return nil, err
	}
	if s.wake, err = windows.CreateEvent(nil, 1, 0, nil); err != nil {
		return nil, os.NewSyscallError("CreateEvent", err)
	}
	p := &Process{id: id, done: make(chan struct{}), sys: s}
	go p.watch()
	return p, nil
}

// watch waits for the process's exit or the wake.
func (p *Process) watch() {
	defer close(p.sys.ended)
	ev, err := windows.WaitForMultipleObjects([]windows.Handle{p.sys.h, p.sys.wake}, false, windows.INFINITE)
	if err == nil && ev == windows.WAIT_OBJECT_0 {
		close(p.done)
	}
}

func (s sysProcess) close() error {
	windows.SetEvent(s.wake)
	<-s.ended
	return errors.Join(windows.CloseHandle(s.h), windows.CloseHandle(s.wake))
}
