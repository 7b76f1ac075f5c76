package authority

import (
	"errors"
	"fmt"
	"os"

	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// sysProcess holds a pidfd, or, where pidfd is unavailable ([PidfdError]), nothing but the caller's
// own child (osp, set by FromOS) or the proven incarnation (checked mode, see process_checked.go).
type sysProcess struct {
	pidfd *os.File
	osp   *os.Process
}

func acquire(rec procid.Record) (*Process, error) {
	if !pidfdWorks() {
		return acquireChecked(rec)
	}
	// The handle first, the proof second: see prove for why the order makes the pidfd R's.
	f, err := openPidfd(rec.PID)
	switch {
	case errors.Is(err, procid.ErrGone):
		// R started before this call; no process holding its PID now means R has exited.
		return nil, fmt.Errorf("authority: acquire pid %d: %w", rec.PID, procid.ErrGone)
	case err != nil:
		// EINVAL: the PID is a thread of another process; EMFILE and the like: no handle.
		return nil, fmt.Errorf("%w over pid %d: no handle: %v", ErrNoAuthority, rec.PID, err)
	}
	id, err := prove(rec, func() bool { return fileExited(f) }, fileID(f))
	if err != nil {
		f.Close()
		return nil, err
	}
	return newProcess(id, sysProcess{pidfd: f}), nil
}

func fromOS(osp *os.Process) (*Process, error) { return fromOSAs(osp, nil) }

func fromChild(osp *os.Process, id procid.ID) (*Process, error) { return fromOSAs(osp, &id) }

// fromOSAs is FromOS, with the ID known when id is not nil.
func fromOSAs(osp *os.Process, known *procid.ID) (*Process, error) {
	if !pidfdWorks() {
		return fromOSChecked(osp)
	}
	// A new pidfd, not a dup of Go's: a dup shares the open file description, so making it
	// non-blocking for the poller would make Go's own waitid(P_PIDFD) fail with EAGAIN. Opening
	// by PID is safe inside WithHandle: the child is unreaped, so its PID cannot be recycled.
	fd, dupErr := -1, error(nil)
	err := osp.WithHandle(func(uintptr) { fd, dupErr = pidfdOpen(osp.Pid) })
	switch {
	case errors.Is(err, os.ErrNoHandle):
		// Started before pidfd worked, or by a runtime that could not take one at spawn.
		return fromOSChecked(osp)
	case errors.Is(err, os.ErrProcessDone):
		return nil, fmt.Errorf("authority: wrap pid %d: already waited for: %w", osp.Pid, procid.ErrGone)
	case err != nil:
		return nil, fmt.Errorf("authority: wrap pid %d: %w", osp.Pid, err)
	case dupErr != nil:
		return nil, fmt.Errorf("authority: wrap pid %d: %w", osp.Pid, os.NewSyscallError("pidfd_open", dupErr))
	}
	f, err := newPidfdFile(fd, osp.Pid)
	if err != nil {
		return nil, fmt.Errorf("authority: wrap pid %d: %w", osp.Pid, err)
	}
	if known != nil {
		id := *known
		if id.PidfdID == 0 {
			id.PidfdID = fileID(f)
		}
		return newProcess(id, sysProcess{pidfd: f}), nil
	}
	// The ID is for display here: the pidfd, not the read, is the authority. A child that has
	// already exited reads as gone and keeps Start 0.
	id := procid.ID{PID: osp.Pid}
	if inc, err := procid.Read(osp.Pid); err == nil {
		id = inc.ID
	}
	id.PidfdID = fileID(f)
	return newProcess(id, sysProcess{pidfd: f}), nil
}

func (p *Process) pinned() bool { return p.sys.pidfd != nil || p.sys.osp != nil }

func (p *Process) signal(sig os.Signal) error {
	s, err := unixSignal(sig)
	if err != nil {
		return err
	}
	if p.sys.pidfd == nil {
		return p.checkedSignal(s)
	}
	var sigErr error
	if err := p.control(func(fd uintptr) { sigErr = unix.PidfdSendSignal(int(fd), s, nil, 0) }); err != nil {
		return p.errClosed("signal")
	}
	// EPERM satisfies errors.Is(err, os.ErrPermission).
	if err := procid.SyscallError("pidfd_send_signal", sigErr); err != nil {
		return fmt.Errorf("authority: signal pid %d: %w", p.id.PID, err)
	}
	return nil
}

func (p *Process) exited() (bool, error) {
	if p.sys.pidfd == nil {
		return p.checkedExited()
	}
	var exited bool
	var pollErr error
	if err := p.control(func(fd uintptr) { exited, pollErr = pollExited(fd) }); err != nil {
		return false, p.errClosed("exited")
	}
	if pollErr != nil {
		return false, fmt.Errorf("authority: exited pid %d: %w", p.id.PID, pollErr)
	}
	return exited, nil
}

// watch parks on the runtime poller until the pidfd turns readable (the process exited) or the
// file is closed, holding no thread while it waits.
func (p *Process) watch() error {
	if p.sys.pidfd == nil {
		return p.checkedWatch()
	}
	rc, err := p.sys.pidfd.SyscallConn()
	if err != nil {
		return p.errClosed("wait")
	}
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		var exited bool
		exited, pollErr = pollExited(fd)
		return exited || pollErr != nil
	})
	switch {
	case err != nil:
		return p.errClosed("wait")
	case pollErr != nil:
		return fmt.Errorf("authority: wait pid %d: %w", p.id.PID, pollErr)
	}
	return nil
}

func (p *Process) close() error {
	if p.sys.pidfd == nil {
		return nil
	}
	return p.sys.pidfd.Close()
}

// control runs fn with the pidfd held open; it fails only when the file was closed.
func (p *Process) control(fn func(fd uintptr)) error {
	rc, err := p.sys.pidfd.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(fn)
}

// fileExited reports whether the pidfd's process has exited; an error reads as not exited.
func fileExited(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var exited bool
	rc.Control(func(fd uintptr) { exited, _ = pollExited(fd) })
	return exited
}

// fileID returns the pidfs id of the pidfd's process, or 0 where the kernel has none.
func fileID(f *os.File) uint64 {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	var id uint64
	rc.Control(func(fd uintptr) { id, _ = procid.PidfdID(fd) })
	return id
}
