// Package localsock is custody's local-socket transport: a Unix-domain stream socket that only
// its user can reach, and the credentials of the process at the other end as the kernel recorded
// them. The grant transfer, the supervisor's sockets and the agent use it, so that listening,
// dialling and the peer's credentials are written once.
//
//	OS       reachable by its user alone through          peer credentials
//	Linux    a socket bound under umask 077, in a         SO_PEERCRED: pid and uid at connect(2)
//	         directory of mode 0700 (MkdirPrivate)        (the connecting side) or listen(2)
//	macOS    the same                                     LOCAL_PEERCRED (uid) + LOCAL_PEERPID
//	others   ErrUnsupported                               ErrUnsupported
//
// Windows has Unix-domain sockets but neither peer credentials nor descriptor passing through
// them; custody uses named pipes there, outside this package.
package localsock

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// Cred is what the kernel recorded of a socket's peer: a peer cannot claim another PID or uid.
type Cred struct {
	PID int
	UID int
}

// ErrForeignPeer is returned by [CheckSameUser] for a peer of another user.
var ErrForeignPeer = errors.New("localsock: peer is another user")

// Listen makes a listening socket at path, reachable by its owner's user alone: the umask is
// narrowed around bind(2), so that no moment exists in which another user could connect (a chmod
// after the bind would leave one). The directory holding path should be private too (see
// [MkdirPrivate]): the umask guards the socket node, not the way to it.
func Listen(path string) (*net.UnixListener, error) { return listen(path) }

// Dial connects to the socket at path.
func Dial(path string) (*net.UnixConn, error) {
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
}

// MkdirPrivate makes a new directory of mode 0700 under dir (the temporary directory when empty)
// with a fresh random name starting with prefix: it fails rather than reuse one that exists, so
// nobody but its user (and root) can enter it.
func MkdirPrivate(dir, prefix string) (string, error) { return os.MkdirTemp(dir, prefix) }

// PeerCred returns the credentials of c's peer.
func PeerCred(c *net.UnixConn) (Cred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("localsock: peer credentials: %w", err)
	}
	var cred Cred
	var credErr error
	if err := rc.Control(func(fd uintptr) { cred, credErr = peerCredFD(int(fd)) }); err != nil {
		return Cred{}, fmt.Errorf("localsock: peer credentials: %w", err)
	}
	return cred, credErr
}

// CheckSameUser returns c's peer's credentials, or an error wrapping [ErrForeignPeer] when the
// peer runs as another user than this process's effective uid.
func CheckSameUser(c *net.UnixConn) (Cred, error) {
	cred, err := PeerCred(c)
	if err != nil {
		return Cred{}, err
	}
	if cred.UID != os.Geteuid() {
		return cred, fmt.Errorf("%w: pid %d is uid %d, not uid %d", ErrForeignPeer, cred.PID, cred.UID, os.Geteuid())
	}
	return cred, nil
}
