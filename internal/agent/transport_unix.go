//go:build unix

package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/localsock"
)

// FromFD takes the connection on descriptor fd, inherited from the client: one end of a
// socketpair(AF_UNIX, SOCK_STREAM). The descriptor itself is closed (the connection holds a
// close-on-exec copy), so no child the agent starts inherits the client's connection, which
// would keep it open after the agent's end.
func FromFD(fd int) (*net.UnixConn, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("agent: descriptor %d: %w", fd, os.NewSyscallError("getsockopt SO_TYPE", err))
	}
	if typ != unix.SOCK_STREAM {
		return nil, fmt.Errorf("agent: descriptor %d: not a stream socket", fd)
	}
	f := os.NewFile(uintptr(fd), "client")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("agent: descriptor %d: %w", fd, err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("agent: descriptor %d: not a Unix-domain socket", fd)
	}
	return uc, nil
}

// Socket is the agent's listening socket: it accepts one client of the agent's own user, and
// refuses every later connection with an error line.
type Socket struct {
	path string
	ln   *net.UnixListener
	once sync.Once
}

// Listen listens at path, whose directory must be the user's (or root's) and writable by nobody
// else: another user able to replace the node could stand in for the agent.
func Listen(path string) (*Socket, error) {
	dir := filepath.Dir(path)
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("agent: socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return nil, fmt.Errorf("agent: socket directory %s: not a directory", dir)
	}
	if uid := int(st.Uid); uid != os.Geteuid() && uid != 0 {
		return nil, fmt.Errorf("agent: socket directory %s: owned by uid %d, not by this user", dir, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("agent: socket directory %s: mode %v: writable by others", dir, fi.Mode().Perm())
	}
	ln, err := localsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	return &Socket{path: path, ln: ln}, nil
}

// ErrNoClient is Accept's error when no client connected within its bound.
var ErrNoClient = errors.New("no client connected")

// Accept returns the first client of the agent's user, with its credentials as the kernel
// recorded them at connect(2). A connection of another user is refused and closed, and the wait
// goes on. From then on every connection is refused: one agent, one owner. A within above zero
// bounds the wait: when no client of the user has connected by then, the error wraps
// ErrNoClient.
func (s *Socket) Accept(within time.Duration) (*net.UnixConn, localsock.Cred, error) {
	if within > 0 {
		s.ln.SetDeadline(time.Now().Add(within))
	}
	for {
		c, err := s.ln.AcceptUnix()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, localsock.Cred{}, fmt.Errorf("agent: %w within %v", ErrNoClient, within)
		}
		if err != nil {
			return nil, localsock.Cred{}, fmt.Errorf("agent: accept: %w", err)
		}
		cred, err := localsock.CheckSameUser(c)
		if err != nil {
			refuse(c, codePermissionDenied, err.Error())
			continue
		}
		s.ln.SetDeadline(time.Time{}) // the refusals of later connections wait for ever
		s.once.Do(func() { go s.refuseAll() })
		return c, cred, nil
	}
}

// refuseAll answers every later connection with an error line, until the socket is closed.
func (s *Socket) refuseAll() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		refuse(c, codeBusy, "this agent has its client already; one agent serves one owner")
	}
}

func refuse(c *net.UnixConn, code, msg string) {
	c.Write(encodeFailure(null, errorf(code, "%s", msg)))
	c.Close()
}

// Close stops listening and removes the socket's node.
func (s *Socket) Close() error {
	err := s.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
