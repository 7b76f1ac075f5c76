package custody

// Facts relied on by the Windows transfer:
//
//	a named pipe \\.\pipe\custody-grant-<random>
//	                    created with a DACL that grants access to the giver's user alone,
//	                    FILE_FLAG_FIRST_PIPE_INSTANCE (fails if the name is anyone else's) and one
//	                    instance at most, rejecting remote clients
//	GetNamedPipeClientProcessId, GetNamedPipeServerProcessId
//	                    the peer's PID as the pipe recorded it at connect and create; a peer
//	                    cannot forge it. Its process token's user SID is the peer's user
//	FILE_FLAG_OVERLAPPED handles wrapped by os.NewFile
//	                    get Go's I/O completion port: reads and writes honour SetDeadline, so a
//	                    silent peer cannot hold the exchange past handshakeTimeout
//	the job             is shared, not described: the giver duplicates its handle into the
//	                    receiver (scope.ShareJob), which proves it (scope.AdoptJob); the job
//	                    lives while either handle is open, and the giver closes its own only
//	                    after the receipt. A receiver that dies before then loses its handle
//	                    and the child stays the giver's; a giver that dies first leaves the job
//	                    to the receiver's handle only while the receiver redeems: a refused or
//	                    failed redemption closes it (dropOffer, abandon) and the job dies.

import (
	"context"
	"fmt"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"golang.org/x/sys/windows"
)

// listenGrant creates the giver's named pipe; it has no directory to remove.
func listenGrant() (grantListener, string, error) {
	l, err := listenPipe()
	if err != nil {
		return nil, "", err
	}
	return l, l.name, nil
}

// dialGrant opens the giver's pipe and checks that its server is the giver the grant names and of
// this user: a pipe created under the name by anyone else is refused before the secret is sent.
func dialGrant(tok grantToken) (grantConn, error) {
	conn, err := dialPipe(tok.Sock)
	if err != nil {
		return nil, err
	}
	pid, err := conn.serverPID()
	if err == nil && pid != tok.Giver {
		err = fmt.Errorf("%w: its pipe is held by pid %d, not by the giver pid %d", ErrGrantRefused, pid, tok.Giver)
	}
	if err == nil {
		if uerr := sameUser(pid); uerr != nil {
			err = fmt.Errorf("%w: %v", ErrGrantRefused, uerr)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// checkPeer returns the PID of the receiver on conn, or why it is refused: its PID cannot be
// read, or it is another user.
func checkPeer(c grantConn) (int, error) {
	conn := c.(*pipeConn)
	pid, err := conn.clientPID()
	if err != nil {
		return 0, err
	}
	if err := sameUser(pid); err != nil {
		return 0, err
	}
	return pid, nil
}

// shareJob duplicates the child's job handle into the receiver.
func (c *Child) shareJob(receiver int) (uint64, error) {
	h, err := c.scope.ShareJob(receiver)
	return uint64(h), err
}

// dropOffer closes the job handle the giver duplicated into this process, on a redemption that
// does not reach adoptScope.
func dropOffer(off offer) {
	if off.Job != 0 {
		windows.CloseHandle(windows.Handle(off.Job))
	}
}

// adoptScope takes the job handle the giver duplicated into this process and proves that the
// child runs in that job.
func adoptScope(off offer, leader procid.ID) (*scope.Scope, error) {
	return scope.AdoptJob(uintptr(off.Job), leader)
}

// coverAdopted: the job handle is the cover.
func (o *Owner) coverAdopted(s *scope.Scope, scopeID string) error { return o.cover(s, scopeID) }

// exitStatus reads the adopted child's exit code, which Windows tells any holder of a handle on
// it (see authority.Process.ExitStatus).
func (c *Child) exitStatus() error {
	st, err := c.proc.ExitStatus(context.Background())
	switch {
	case err != nil:
		return fmt.Errorf("pid %d: %w", c.ID.PID, ErrExitUnknown)
	case st.Code == 0:
		return nil
	}
	return &ExitError{PID: c.ID.PID, ExitStatus: st}
}
