//go:build unix

package authority

// Checked mode: authority without a kernel handle (macOS; Linux when pidfd is unavailable). The
// incarnation is proven at Acquire and proven again, by exact start, immediately before every
// kill(2). A window remains between that read and the signal: were the process to exit, be
// reaped, and its PID be handed to a new process in those few microseconds, the signal would
// reach the newcomer. Both kernels hand out PIDs in increasing order and wrap only at pid_max
// (Linux: 32768 by default, 4194304 where systemd raises it; macOS: 99999), so that takes a
// full wrap of the PID space inside the window, unless a privileged process steers the allocator
// (Linux's ns_last_pid, as this package's tests do).

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

func acquireChecked(rec procid.Record) (*Process, error) {
	id, err := prove(rec, nil, 0)
	if err != nil {
		return nil, err
	}
	return newProcess(id, sysProcess{}), nil
}

// fromOSChecked wraps the caller's own child without a handle: signals go through osp, which
// cannot reach a recycled PID (os.Process marks itself done under sigMu before it reaps, Go CL
// 23967), and exits are seen by reading its incarnation.
func fromOSChecked(osp *os.Process) (*Process, error) {
	if err := osp.Signal(unix.Signal(0)); errors.Is(err, os.ErrProcessDone) {
		return nil, fmt.Errorf("authority: wrap pid %d: already waited for: %w", osp.Pid, procid.ErrGone)
	}
	inc, err := procid.Read(osp.Pid)
	switch {
	case err == nil:
		return newProcess(inc.ID, sysProcess{osp: osp}), nil
	case errors.Is(err, procid.ErrGone):
		// A zombie: it exited, and its PID is pinned until the caller reaps it.
		p := newProcess(procid.ID{PID: osp.Pid}, sysProcess{osp: osp})
		p.exitSeen.Store(true)
		return p, nil
	}
	return nil, fmt.Errorf("authority: wrap pid %d: %w", osp.Pid, err)
}

func (p *Process) checkedSignal(sig unix.Signal) error {
	if p.sys.osp != nil {
		err := p.sys.osp.Signal(sig)
		switch {
		case errors.Is(err, os.ErrProcessDone):
			return p.errGone("signal")
		case err != nil:
			return fmt.Errorf("authority: signal pid %d: %w", p.id.PID, err)
		}
		return nil
	}
	// The last moment before acting: re-prove by exact start.
	if err := p.id.Verify(); err != nil {
		if errors.Is(err, procid.ErrGone) || errors.Is(err, procid.ErrReused) {
			// The proven incarnation has exited: another start at its PID means it is gone too.
			p.exitSeen.Store(true)
			return p.errGone("signal")
		}
		return fmt.Errorf("%w over pid %d: cannot re-read it before signalling: %v", ErrNoAuthority, p.id.PID, err)
	}
	if err := procid.SyscallError("kill", unix.Kill(p.id.PID, sig)); err != nil {
		return fmt.Errorf("authority: signal pid %d: %w", p.id.PID, err)
	}
	return nil
}

// checkedExited reads the incarnation: gone or replaced is exited; unreadable is an error, never
// an exit (missing proof is never death).
func (p *Process) checkedExited() (bool, error) {
	if p.exitSeen.Load() {
		return true, nil
	}
	err := p.id.Verify()
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, procid.ErrGone) || errors.Is(err, procid.ErrReused):
		p.exitSeen.Store(true)
		return true, nil
	}
	return false, fmt.Errorf("authority: exited pid %d: %w", p.id.PID, err)
}

// checkedWatch polls the incarnation, from 1 ms up to every 100 ms, until it exits or p closes.
func (p *Process) checkedWatch() error {
	delay := time.Millisecond
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		if exited, _ := p.checkedExited(); exited {
			return nil
		}
		select {
		case <-p.closing:
			return p.errClosed("wait")
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
		t.Reset(delay)
	}
}

// unixSignal accepts the signals of package syscall (os.Kill and os.Interrupt are such).
func unixSignal(sig os.Signal) (unix.Signal, error) {
	s, ok := sig.(unix.Signal)
	if !ok {
		return 0, fmt.Errorf("authority: signal %v: %w", sig, errors.ErrUnsupported)
	}
	return s, nil
}
