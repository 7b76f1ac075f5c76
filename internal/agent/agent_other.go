//go:build !unix

package agent

import (
	"errors"
	"fmt"
	"net"
	"runtime"

	"github.com/custody-dev/custody/internal/localsock"
)

// Serve is not implemented here: the agent passes descriptors over a Unix-domain socket, and on
// Windows it is to serve a named pipe and duplicate handles instead.
func Serve(uc *net.UnixConn, cfg Config) error {
	return fmt.Errorf("agent: %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// FromFD is not implemented here (see [Serve]).
func FromFD(fd int) (*net.UnixConn, error) {
	return nil, fmt.Errorf("agent: --fd: %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Socket is not implemented here (see [Serve]).
type Socket struct{}

// Listen is not implemented here (see [Serve]).
func Listen(path string) (*Socket, error) {
	return nil, fmt.Errorf("agent: --socket: %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Accept is not implemented here.
func (s *Socket) Accept() (*net.UnixConn, localsock.Cred, error) {
	return nil, localsock.Cred{}, errors.ErrUnsupported
}

// Close is not implemented here.
func (s *Socket) Close() error { return nil }
