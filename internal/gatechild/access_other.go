//go:build unix && !linux

package gatechild

import "golang.org/x/sys/unix"

// accessMode returns the descriptor's access mode (O_RDONLY, O_WRONLY or O_RDWR). Outside Linux
// fcntl(2) goes through the C library, as golang.org/x/sys/unix calls it.
func accessMode(fd int) (int, error) {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return fl & unix.O_ACCMODE, err
}
