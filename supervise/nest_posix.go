//go:build linux || darwin

package supervise

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/custody-dev/custody/internal/localsock"
	"github.com/custody-dev/custody/internal/sockdir"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// Bounds of the nest socket: connections read at once, groups covered for nested owners, and
// the ancestors walked to find the peer's covered group.
const (
	maxNested    = 1024
	maxAncestors = 32
	// nestWait is how long a registration whose peer is in no covered group yet waits for the
	// owner's line that covers it, shorter than the nested owner's NestTimeout so that the
	// refusal is answered.
	nestWait = NestTimeout * 3 / 5
)

// errNotInScope is admit's answer for a peer in no covered group: the one refusal that may be
// early, since the owner's line that covers the peer's group reaches the supervisor on another
// path than the peer's connection.
const errNotInScope = "peer is in no covered group"

// nestRequest is one line from a nested owner's connection.
type nestRequest struct {
	cmd   command
	conn  uint64 // the connection, for unregister
	peer  int    // the connected process, from its credentials
	uid   int
	reply chan bool // buffered
	// expires ends the wait of a request whose peer is in no covered group yet.
	expires time.Time
}

// nestServer is the server with the nest socket: by records which connection registered each
// nested group.
type nestServer struct {
	*server
	by      map[int]uint64
	waiting []nestRequest // requests waiting for the owner's line that covers their peer
}

// listenNest makes the nest socket at path, or returns nil when path is empty or the socket
// cannot be made; then the supervisor serves its owner alone, and nested owners, failing to
// register, say so.
func listenNest(path string, log *slog.Logger) *net.UnixListener {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	mkdir := func() (string, error) { return dir, makeNestDir(dir) }
	listenAnew := func(path string) (*net.UnixListener, error) {
		os.Remove(path) // a lost supervisor's, killed before it could remove it
		return listen(path)
	}
	ln, _, lock, err := sockdir.Listen(mkdir, listenAnew)
	if err != nil {
		log.Warn("supervise: nest socket", "err", err)
		return nil
	}
	supervisorNest = lock
	return ln
}

// makeNestDir makes the nest socket's directory, mode 0700, or accepts it when it exists already
// as this user's with that mode: a lost supervisor's, in which its replacement listens. A name
// taken by anyone else (the temporary directory is everyone's) is refused: another user's
// directory could hold a socket that impersonates the supervisor.
func makeNestDir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) && ownPrivateDir(dir) {
		return nil
	}
	return err
}

// closeNest removes the socket and then the client's directory, once empty.
func closeNest(ln *net.UnixListener) {
	path := ln.Addr().String()
	ln.Close()
	os.Remove(filepath.Dir(path))
}

func serveNest(ctx context.Context, in io.Reader, ln *net.UnixListener, cfg Config) error {
	s := &nestServer{server: newServer(cfg), by: make(map[int]uint64)}
	done := make(chan struct{})
	defer close(done)
	lines := make(chan stdinEvent)
	reqs := make(chan nestRequest)
	go readOwner(in, lines, done)
	go acceptNested(ln, reqs, done, s.log)
	for {
		var ev stdinEvent
		select { // the owner's lines, its end of input above all, go first
		case ev = <-lines:
		default:
			select {
			case ev = <-lines:
			case r := <-reqs:
				r.expires = time.Now().Add(nestWait)
				s.answer(r)
				continue
			case <-s.nextExpiry():
				s.retry()
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if ends(ev.err) {
			stop := s.answerDuringSweep(reqs)
			s.ownerInput(ev.line, ev.err, s.handleThenRetry)
			stop()
			return nil
		}
		s.ownerInput(ev.line, ev.err, s.handleThenRetry)
	}
}

// answerDuringSweep answers the nested owners while the sweep that follows the end of the owner's
// input runs, up to the grace: the registrations waiting for an owner's line are refused now,
// and every line read until stop is called is answered from what was registered before, with no
// change to what the sweep covers. A nested owner is told "refused" for a new registration (a
// child must not start in a scope being torn down: its start fails and the child, held at its
// gate, never runs) and "ok" for the release of a group it registered (the sweep still stops it,
// as everything else in the dying scope). Unanswered, a nested owner stopping its child on the
// SIGTERM of this sweep would wait for its answer until the sweep SIGKILLed it at the grace,
// rather than end as its SIGTERM asks.
func (s *nestServer) answerDuringSweep(reqs <-chan nestRequest) (stop func()) {
	for _, r := range s.waiting {
		r.reply <- false
	}
	s.waiting = nil
	by := maps.Clone(s.by) // the sweep's goroutine is this one: the copy is not shared
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case r := <-reqs:
				r.reply <- r.cmd.verb == verbUnregister && by[r.cmd.pgid] == r.conn
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// handleThenRetry acts on the owner's line, then answers the nested registrations that were
// waiting for a line that covers their peer.
func (s *nestServer) handleThenRetry(line []byte) {
	s.handle(line)
	s.retry()
}

// answer answers a nested owner's line, or keeps it waiting when its peer is in no covered group
// yet: the owner covers a child's group before it lets the child run, but that line and the
// child's connection reach the supervisor on two paths, and the order in which they are read
// must not refuse a registration.
func (s *nestServer) answer(r nestRequest) {
	ok, why := s.nested(r)
	if why == errNotInScope && time.Now().Before(r.expires) {
		s.waiting = append(s.waiting, r)
		return
	}
	if why != "" {
		s.log.Warn("supervise: refused nested registration", "pgid", r.cmd.pgid, "peer", r.peer, "reason", why)
	}
	r.reply <- ok
}

// retry answers the waiting requests again, after an owner's line or an expiry.
func (s *nestServer) retry() {
	w := s.waiting
	s.waiting = nil
	for _, r := range w {
		s.answer(r)
	}
}

// nextExpiry fires when the first waiting request expires; nil (never) when none waits.
func (s *nestServer) nextExpiry() <-chan time.Time {
	if len(s.waiting) == 0 {
		return nil
	}
	first := s.waiting[0].expires
	for _, r := range s.waiting[1:] {
		if r.expires.Before(first) {
			first = r.expires
		}
	}
	return time.After(time.Until(first))
}

// nested handles a nested owner's line: ok when done, or why it was refused.
func (s *nestServer) nested(r nestRequest) (ok bool, why string) {
	if r.cmd.verb == verbUnregister {
		if s.by[r.cmd.pgid] != r.conn {
			return false, "unregister of a group this connection did not register"
		}
		delete(s.by, r.cmd.pgid)
		s.drop(r.cmd.pgid)
		return true, ""
	}
	if why := s.admit(r); why != "" {
		return false, why
	}
	s.register(r.cmd)
	if _, ok := s.covered[r.cmd.pgid]; !ok {
		return false, "not covered (see the log above)"
	}
	s.by[r.cmd.pgid] = r.conn
	return true, ""
}

// admit says why a nested registration is refused, or "" (see the rules in nest.go).
func (s *nestServer) admit(r nestRequest) string {
	cmd := r.cmd
	switch {
	case r.uid != os.Geteuid():
		return "peer is another user"
	case cmd.verb != verbRegister || !cmd.known || cmd.pid != cmd.pgid:
		return "not a registration of a leader with its start"
	}
	if why := s.refuse(cmd.pgid); why != "" {
		return why
	}
	if _, again := s.by[cmd.pgid]; !again && s.prune() >= maxNested {
		return "too many nested groups"
	}
	peer, err := procid.Read(r.peer)
	if err != nil {
		return "peer unreadable: " + err.Error()
	}
	if !s.inScope(peer) {
		return errNotInScope
	}
	leader, err := procid.Read(cmd.pid)
	switch {
	case err != nil:
		return "leader unreadable: " + err.Error()
	case leader.PGID != cmd.pgid || leader.Start != cmd.start:
		return "pid does not lead the group with that start"
	case leader.PPID != r.peer:
		return "the group's leader is not the peer's child"
	}
	if now, err := procid.Read(r.peer); err != nil || now.Start != peer.Start {
		return "peer exited during the checks"
	}
	return ""
}

// inScope reports whether p or one of its ancestors is a member of a covered group whose
// identity holds.
func (s *nestServer) inScope(p procid.Incarnation) bool {
	for range maxAncestors {
		// Signal 0 succeeds only while the group's identity holds and it has members.
		if g, ok := s.covered[p.PGID]; ok && g.Signal(syscall.Signal(0)) == nil {
			return true
		}
		if p.PPID <= 1 {
			return false
		}
		var err error
		if p, err = procid.Read(p.PPID); err != nil {
			return false
		}
	}
	return false
}

// prune forgets nested groups that are gone, and returns how many are left.
func (s *nestServer) prune() int {
	var census scope.Census
	for pgid := range s.by {
		if g, ok := s.covered[pgid]; !ok || gone(g, &census) {
			s.drop(pgid)
			delete(s.by, pgid)
		}
	}
	return len(s.by)
}

// acceptNested serves the nest socket: each connection is read by its own goroutine, at most
// maxConns at once.
func acceptNested(ln *net.UnixListener, reqs chan<- nestRequest, done <-chan struct{}, log *slog.Logger) {
	slots := make(chan struct{}, maxConns)
	var id uint64
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Warn("supervise: accept", "err", err)
			}
			select {
			case <-done:
				return
			case <-time.After(pollInterval): // EMFILE and the like: try again, never spin
				continue
			}
		}
		id++
		select {
		case slots <- struct{}{}:
			go func(id uint64) {
				defer func() { <-slots }()
				serveNestConn(c, id, reqs, done, log)
			}(id)
		default:
			c.Close()
		}
	}
}

// pacedReader reads a nested owner's connection for lr. A connection's first line, and the rest
// of any line begun, must arrive within NestTimeout; between lines a connection may stay idle as
// long as its owner lives (a nested owner keeps one open for its next registration). Without the
// bound a connection that sends nothing, or half a line, would hold one of the maxConns slots,
// and the peer waiting for an answer would wait its own timeout to learn nothing.
type pacedReader struct {
	c    *net.UnixConn
	lr   *lineReader
	read bool // a line was read already
}

func (p *pacedReader) Read(b []byte) (int, error) {
	var deadline time.Time // none: idle between lines
	if !p.read || p.lr.pending() {
		deadline = time.Now().Add(NestTimeout)
	}
	p.c.SetReadDeadline(deadline)
	n, err := p.c.Read(b)
	if n > 0 {
		p.read = true
	}
	return n, err
}

// serveNestConn reads a nested owner's lines and answers each with ok or refused; a line that is
// no register or unregister command is refused too, and so are a line too long (at its newline)
// and a line not ended within NestTimeout (then the connection is closed; see pacedReader).
func serveNestConn(c *net.UnixConn, id uint64, reqs chan<- nestRequest, done <-chan struct{}, log *slog.Logger) {
	defer c.Close()
	peer, err := localsock.PeerCred(c)
	if err != nil {
		log.Warn("supervise: refused nested connection", "err", err, "reason", "no peer credentials")
		return
	}
	lr := &lineReader{}
	lr.r = &pacedReader{c: c, lr: lr}
	for {
		line, err := lr.next()
		if errors.Is(err, os.ErrDeadlineExceeded) && lr.pending() {
			c.Write([]byte("refused\n")) // a line begun and not ended: never acted on
		}
		if err != nil && err != errLong {
			return
		}
		cmd, ok := parseLine(line)
		if err == nil && ok && (cmd.verb == verbRegister || cmd.verb == verbUnregister) {
			r := nestRequest{cmd: cmd, conn: id, peer: peer.PID, uid: peer.UID, reply: make(chan bool, 1)}
			select {
			case reqs <- r:
			case <-done:
				return
			}
			select {
			case ok = <-r.reply:
			case <-done:
				return
			}
		} else {
			ok = false
		}
		answer := "refused\n"
		if ok {
			answer = "ok\n"
		}
		if _, err := c.Write([]byte(answer)); err != nil {
			return
		}
	}
}
