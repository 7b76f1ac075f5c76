package custody

import (
	"os"

	"golang.org/x/sys/unix"
)

// gatePipe makes the gate's pipe, both ends close-on-exec from their first instant: a fork on
// another thread meanwhile must not take a copy that would hold the gate open past the owner's
// death.
func gatePipe() (r, w int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, os.NewSyscallError("pipe2", err)
	}
	return p[0], p[1], nil
}
