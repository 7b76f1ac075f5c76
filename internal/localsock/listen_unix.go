//go:build unix

package localsock

import (
	"net"

	"golang.org/x/sys/unix"
)

func listen(path string) (*net.UnixListener, error) {
	// The umask is process-wide: a file another goroutine creates during the bind gets 077 too,
	// which is narrower than asked, never wider.
	old := unix.Umask(0o077)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	return ln, err
}
