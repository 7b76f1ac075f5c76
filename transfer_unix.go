//go:build linux || darwin

package custody

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/custody-dev/custody/internal/localsock"
	"github.com/custody-dev/custody/internal/sockdir"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// Facts relied on by the Unix transfer:
//
//	localsock           the giver's socket, in a new directory of mode 0700, is reachable by
//	                    its user alone (and root), and each side reads the other's uid and pid
//	                    as the kernel recorded them; a peer cannot forge them
//	a process group     is covered by the receiver's supervisor as by the giver's: the
//	                    registration names the leader's incarnation, and any process of the
//	                    same user may signal the group

// grantDirPrefix starts the name of every grant's socket directory.
const grantDirPrefix = "custody-grant-"

// unixListener is the giver's socket, in a directory of its own that the giver holds locked
// (sockdir.Lock) while it serves the grant. A giver killed mid-grant cannot remove the
// directory; the kernel drops its lock, and the next grant made there removes it (sweepGrantDirs).
type unixListener struct {
	*net.UnixListener
	dir  string
	lock *sockdir.Lock
	once sync.Once
}

func (l *unixListener) accept() (grantConn, error) { return l.AcceptUnix() }

// Close stops listening, then removes the directory and drops its lock, in that order: a lock
// dropped first would let a sweeper take the directory from under its socket. The listener is
// closed more than once (at the redemption's start, from outside on expiry, at the end).
func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		os.RemoveAll(l.dir)
		l.lock.Release()
	})
	return err
}

// listenGrant listens on a socket in a new directory of the giver's own, and returns it with the
// socket's path. A sweep of another grant's may remove the directory before it is locked, or
// before the socket is in it: it is made again under a new name (sockdir.Listen).
func listenGrant() (grantListener, string, error) {
	mkdir := func() (string, error) { return localsock.MkdirPrivate("", grantDirPrefix) }
	ln, dir, lock, err := sockdir.Listen(mkdir, localsock.Listen)
	if err != nil {
		if dir != "" {
			os.RemoveAll(dir)
		}
		return nil, "", err
	}
	go sweepGrantDirs(filepath.Dir(dir), filepath.Base(dir))
	return &unixListener{UnixListener: ln, dir: dir, lock: lock}, ln.Addr().String(), nil
}

// sweepGrantDirs removes from tmp the grant directories, but own, that no giver holds: their
// givers died mid-grant.
func sweepGrantDirs(tmp, own string) []string { return sockdir.Sweep(tmp, grantDirPrefix, own) }

// dialGrant connects to the giver's socket and checks that the listener is the giver the grant
// names and of this user: a socket put in its place by anyone else is refused before the secret
// is sent.
func dialGrant(tok grantToken) (grantConn, error) {
	conn, err := localsock.Dial(tok.Sock)
	switch {
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("%w: another user's grant: %v", ErrGrantRefused, err)
	case err != nil:
		return nil, fmt.Errorf("%w: its giver is gone or the grant was used: %v", ErrGrantRefused, err)
	}
	peer, err := localsock.CheckSameUser(conn)
	switch {
	case errors.Is(err, localsock.ErrForeignPeer):
		err = fmt.Errorf("%w: the grant is uid %d's, not uid %d's", ErrGrantRefused, peer.UID, os.Geteuid())
	case err != nil:
		err = fmt.Errorf("giver's credentials: %w", err)
	case peer.PID != tok.Giver:
		err = fmt.Errorf("%w: its socket is held by pid %d, not by the giver pid %d", ErrGrantRefused, peer.PID, tok.Giver)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// checkPeer returns the PID of the receiver on conn, or why it is refused: its credentials
// cannot be read, or it is another user.
func checkPeer(conn grantConn) (int, error) {
	peer, err := localsock.CheckSameUser(conn.(*net.UnixConn))
	switch {
	case errors.Is(err, localsock.ErrForeignPeer):
		return 0, fmt.Errorf("the grant is uid %d's, not uid %d's", os.Geteuid(), peer.UID)
	case err != nil:
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	return peer.PID, nil
}

// shareJob: Unix scopes need no handle; the receiver opens them from their description.
func (c *Child) shareJob(int) (uint64, error) { return 0, nil }

// dropOffer: a Unix offer holds nothing.
func dropOffer(offer) {}

// adoptScope rebuilds the offered scope on the receiver's side and proves it: a process group by
// its leader, a cgroup by its path and id.
func adoptScope(off offer, leader procid.ID) (*scope.Scope, error) {
	return scope.Open(off.desc(leader))
}

// coverAdopted covers an adopted scope with this owner's supervisor: a cgroup by its path, a
// process group bound to its leader and with the scope id its row records, so that this owner's
// death reaches the descendants that left the group too.
func (o *Owner) coverAdopted(s *scope.Scope, scopeID string) error { return o.cover(s, scopeID) }

// exitStatus reads how the adopted child ended where the kernel tells a non-parent (Linux 6.15+,
// once the parent has reaped it: see authority.Process.ExitStatus), waiting up to reapWait for
// that reap.
func (c *Child) exitStatus() error {
	ctx, cancel := context.WithTimeout(context.Background(), reapWait)
	defer cancel()
	st, err := c.proc.ExitStatus(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("pid %d: %w", c.ID.PID, ErrExitUnknown)
	case st.Code == 0 && st.Signal == 0:
		return nil
	}
	return &ExitError{PID: c.ID.PID, ExitStatus: st}
}
