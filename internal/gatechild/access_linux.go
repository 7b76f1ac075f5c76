package gatechild

import "syscall"

// accessMode returns the descriptor's access mode (O_RDONLY, O_WRONLY or O_RDWR). It is a raw
// fcntl(2): golang.org/x/sys/unix would be initialised before this package, and it sorts after
// the libraries of the github.com paths, which would then be initialised before the gate.
func accessMode(fd int) (int, error) {
	fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(fl) & syscall.O_ACCMODE, nil
}
