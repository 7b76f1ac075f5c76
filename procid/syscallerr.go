package procid

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// SyscallError wraps err, the error of the system call op, as [os.NewSyscallError] does, and
// when it is ESRCH ("no such process": what kill(2), pidfd_open(2), pidfd_send_signal(2) and a
// read of /proc return once the process or group has gone) also wraps [ErrGone], so that callers
// test one sentinel, never an errno. It returns nil for nil.
func SyscallError(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("%w: %w", os.NewSyscallError(op, err), ErrGone)
	}
	return os.NewSyscallError(op, err)
}
