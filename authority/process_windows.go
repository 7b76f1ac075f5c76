package authority

// Windows process handles. API facts relied on:
//
//	OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION|SYNCHRONIZE|PROCESS_TERMINATE)
//	                         granted across users where the DACL allows; ERROR_INVALID_PARAMETER
//	                         when no process object has the PID
//	a PID is never reused while any handle to its process is open, so the handle pins both the
//	process and its PID: procid's own read by PID after the open reads the same process
//	OpenProcess ignores a PID's low two bits: GetProcessId confirms the handle's PID
//	GetProcessTimes          creation FILETIME, procid's Start on Windows
//	TerminateProcess         asynchronous; ERROR_ACCESS_DENIED both when refused and when the
//	                         process has already exited, told apart by WaitForSingleObject
//	closing a handle while a wait on it is pending is undefined, so Close first wakes the
//	waiter through an event and then takes the write lock

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/custody-dev/custody/internal/winproc"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/windows"
)

type sysProcess struct {
	mu      *sync.RWMutex  // read-held while h is in use; Close takes it for writing
	h       windows.Handle // 0 after Close: a closed handle value can be reissued to another object
	closing windows.Handle // manual-reset event set by Close to release a pending wait
	// cleanup closes both handles of a Process dropped without Close, as os.File's finalizer
	// does for a pidfd: a leaked process handle keeps the process object and its PID alive.
	cleanup runtime.Cleanup
}

const processAccess = windows.PROCESS_QUERY_LIMITED_INFORMATION | windows.SYNCHRONIZE | windows.PROCESS_TERMINATE

func acquire(rec procid.Record) (*Process, error) {
	h, err := openProcess(rec.PID)
	switch {
	case errors.Is(err, procid.ErrGone):
		return nil, fmt.Errorf("authority: acquire pid %d: %w", rec.PID, procid.ErrGone)
	case err != nil:
		return nil, fmt.Errorf("%w over pid %d: no handle: %v", ErrNoAuthority, rec.PID, err)
	}
	id, err := prove(rec, func() bool { exited, err := handleExited(h); return err == nil && exited }, 0)
	if err == nil {
		err = checkCreation(h, id)
	}
	if err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	return newHandleProcess(id, h)
}

// openProcess opens pid with the access custody needs. Where PROCESS_TERMINATE is refused (another
// user's process), it opens without it, so the identity can still be proven and Signal reports
// the refusal as a permission error, as pidfd_send_signal does on Linux.
func openProcess(pid int) (windows.Handle, error) {
	h, _, err := winproc.Open(pid, processAccess, windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE)
	if errors.Is(err, winproc.ErrNoProcess) {
		return 0, procid.ErrGone
	}
	return h, err
}

func fromChild(osp *os.Process, _ procid.ID) (*Process, error) { return fromOS(osp) }

func fromOS(osp *os.Process) (*Process, error) {
	var h windows.Handle
	var dupErr error
	err := osp.WithHandle(func(src uintptr) {
		self := windows.CurrentProcess()
		dupErr = windows.DuplicateHandle(self, windows.Handle(src), self, &h, 0, false, windows.DUPLICATE_SAME_ACCESS)
	})
	switch {
	case errors.Is(err, os.ErrProcessDone):
		return nil, fmt.Errorf("authority: wrap pid %d: already waited for: %w", osp.Pid, procid.ErrGone)
	case err != nil:
		// Wait releases the handle on Windows: waited and released look alike, so no authority.
		return nil, fmt.Errorf("%w over pid %d: no handle: %v", ErrNoAuthority, osp.Pid, err)
	case dupErr != nil:
		return nil, fmt.Errorf("authority: wrap pid %d: %w", osp.Pid, os.NewSyscallError("DuplicateHandle", dupErr))
	}
	id := procid.ID{PID: osp.Pid}
	if start, err := winproc.Start(h); err == nil {
		id.Start = start
	}
	return newHandleProcess(id, h)
}

func newHandleProcess(id procid.ID, h windows.Handle) (*Process, error) {
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("authority: pid %d: %w", id.PID, os.NewSyscallError("CreateEvent", err))
	}
	p := newProcess(id, sysProcess{mu: new(sync.RWMutex), h: h, closing: ev})
	p.sys.cleanup = runtime.AddCleanup(p, func(hs [2]windows.Handle) {
		windows.CloseHandle(hs[0])
		windows.CloseHandle(hs[1])
	}, [2]windows.Handle{h, ev})
	return p, nil
}

// checkCreation is belt and braces: the handle pins the PID, so procid's read by PID in prove read
// the handle's process, and its start must be the handle's creation time.
func checkCreation(h windows.Handle, id procid.ID) error {
	start, err := winproc.Start(h)
	if err != nil {
		return fmt.Errorf("%w over pid %d: %v", ErrNoAuthority, id.PID, err)
	}
	if start != id.Start {
		return fmt.Errorf("%w over pid %d: handle's process created at %d, read %v", ErrNoAuthority, id.PID, start, id)
	}
	return nil
}

func handleExited(h windows.Handle) (bool, error) {
	ev, err := windows.WaitForSingleObject(h, 0)
	switch {
	case err != nil:
		return false, os.NewSyscallError("WaitForSingleObject", err)
	case ev == windows.WAIT_OBJECT_0:
		return true, nil
	case ev == uint32(windows.WAIT_TIMEOUT):
		return false, nil
	}
	return false, fmt.Errorf("WaitForSingleObject: unexpected result %#x", ev)
}

func (p *Process) pinned() bool { return true }

// signal terminates the process for os.Kill. An exited process is reported gone whatever the
// signal, before an unsupported one is refused: a stop's first signal is SIGTERM, and a refusal
// would send it on to the kill, reporting a process that exited before the stop as exited after it.
func (p *Process) signal(sig os.Signal) error {
	p.sys.mu.RLock()
	defer p.sys.mu.RUnlock()
	if p.sys.h == 0 {
		return p.errClosed("signal")
	}
	if exited, _ := handleExited(p.sys.h); exited {
		return p.errGone("signal")
	}
	if sig != os.Kill {
		return fmt.Errorf("authority: signal pid %d with %v: %w", p.id.PID, sig, errors.ErrUnsupported)
	}
	if err := windows.TerminateProcess(p.sys.h, 1); err != nil {
		if exited, _ := handleExited(p.sys.h); exited {
			return p.errGone("signal")
		}
		// ERROR_ACCESS_DENIED satisfies errors.Is(err, os.ErrPermission).
		return fmt.Errorf("authority: signal pid %d: %w", p.id.PID, os.NewSyscallError("TerminateProcess", err))
	}
	return nil
}

func (p *Process) exited() (bool, error) {
	p.sys.mu.RLock()
	defer p.sys.mu.RUnlock()
	if p.sys.h == 0 {
		return false, p.errClosed("exited")
	}
	exited, err := handleExited(p.sys.h)
	if err != nil {
		return false, fmt.Errorf("authority: exited pid %d: %w", p.id.PID, err)
	}
	return exited, nil
}

func (p *Process) watch() error {
	p.sys.mu.RLock()
	defer p.sys.mu.RUnlock()
	if p.sys.h == 0 {
		return p.errClosed("wait")
	}
	ev, err := windows.WaitForMultipleObjects([]windows.Handle{p.sys.h, p.sys.closing}, false, windows.INFINITE)
	switch {
	case err != nil:
		return fmt.Errorf("authority: wait pid %d: %w", p.id.PID, os.NewSyscallError("WaitForMultipleObjects", err))
	case ev == windows.WAIT_OBJECT_0:
		return nil
	case ev == windows.WAIT_OBJECT_0+1:
		return p.errClosed("wait")
	}
	return fmt.Errorf("authority: wait pid %d: WaitForMultipleObjects: unexpected result %#x", p.id.PID, ev)
}

func (p *Process) close() error {
	p.sys.cleanup.Stop()
	windows.SetEvent(p.sys.closing) // release a pending watch, which holds the read lock
	p.sys.mu.Lock()
	defer p.sys.mu.Unlock()
	err := windows.CloseHandle(p.sys.h)
	windows.CloseHandle(p.sys.closing)
	p.sys.h, p.sys.closing = 0, 0
	if err != nil {
		return fmt.Errorf("authority: close pid %d: %w", p.id.PID, os.NewSyscallError("CloseHandle", err))
	}
	return nil
}
