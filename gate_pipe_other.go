//go:build unix && !linux

package custody

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// gatePipe makes the gate's pipe. With no pipe2(2) here, both ends are made close-on-exec under
// the fork lock, as os.Pipe does: a fork on another thread meanwhile must not take a copy that
// would hold the gate open past the owner's death.
func gatePipe() (r, w int, err error) {
	var p [2]int
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err := unix.Pipe(p[:]); err != nil {
		return -1, -1, os.NewSyscallError("pipe", err)
	}
	unix.CloseOnExec(p[0])
	unix.CloseOnExec(p[1])
	return p[0], p[1], nil
}
