package authority

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// ExitStatus is how a process ended, as its parent's wait(2) saw it.
type ExitStatus struct {
	Code   int            // the exit code, when Signal is 0
	Signal syscall.Signal // the signal that killed it, or 0
}

// ErrNoExitStatus reports that the OS does not tell a process other than the parent how another
// ended (macOS, Linux before 6.15, Linux without a pidfd), or that the parent had not reaped it
// when the wait ended.
var ErrNoExitStatus = errors.New("authority: exit status not reported to a non-parent")

// ExitStatus returns how the process ended, once it has exited and its parent has reaped it, for
// a caller that is not its parent. Linux 6.15+ keeps the status of a reaped process with its
// pidfs inode, and PIDFD_GET_INFO with PIDFD_INFO_EXIT reads it through the pidfd; ExitStatus
// waits up to ctx for the parent's reap, which is what makes the status appear. Windows tells
// the exit code to any holder of a handle, once the process has exited (Signal is then 0).
// Elsewhere, and when ctx ends first, the error wraps [ErrNoExitStatus].
func (p *Process) ExitStatus(ctx context.Context) (ExitStatus, error) {
	if p.closed.Load() {
		return ExitStatus{}, p.errClosed("exit status")
	}
	st, err := p.exitStatus(ctx)
	if err != nil {
		return st, fmt.Errorf("authority: exit status of pid %d: %w", p.id.PID, err)
	}
	return st, nil
}
