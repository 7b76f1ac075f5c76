//go:build linux || darwin

package supervise

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/custody-dev/custody/procid"
)

// Bounds of the nest socket: connections read at once, groups covered for nested owners, and
// the ancestors walked to find the peer's covered group.
const (
	maxNested    = 1024
	maxAncestors = 32
)

// nestRequest is one line from a nested owner's connection.
type nestRequest struct {
	cmd   command
	conn  uint64 // the connection, for unregister
	peer  int    // the connected process, from its credentials
	uid   int
	reply chan bool // buffered
}

// nestServer is the server with the nest socket: by records which connection registered each
// nested group.
type nestServer struct {
	*server
	by map[int]uint64
}

// runNest serves stdin and the nest socket at path. A socket that cannot be made is logged, and
// the supervisor serves its owner alone: nested owners then fail to register, and say so.
func runNest(ctx context.Context, in io.Reader, path string, cfg Config) error {
	ln, err := listen(path)
	if err != nil {
		cfg.Logger.Warn("supervise: nest socket", "err", err)
		return Serve(ctx, in, cfg)
	}
	defer os.Remove(filepath.Dir(path)) // the client's directory, once empty
	defer ln.Close()                    // removes the socket file
	return serveNest(ctx, in, ln, cfg.withDefaults())
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
				r.reply <- s.nested(r)
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		switch {
		case ev.err == nil:
			s.handle(ev.line)
		case ev.err == errLong:
			s.log.Debug("supervise: ignored line", "reason", ev.err)
		default:
			if ev.err != io.EOF {
				s.log.Warn("supervise: reading from owner", "err", ev.err)
			}
			s.sweep()
			return nil
		}
	}
}

// nested answers a nested owner's line.
func (s *nestServer) nested(r nestRequest) bool {
	if r.cmd.verb == verbUnregister {
		if s.by[r.cmd.pgid] != r.conn {
			s.log.Warn("supervise: refused nested unregister", "pgid", r.cmd.pgid, "peer", r.peer, "reason", "not registered by this connection")
			return false
		}
		delete(s.by, r.cmd.pgid)
		s.drop(r.cmd.pgid)
		return true
	}
	if why := s.admit(r); why != "" {
		s.log.Warn("supervise: refused nested registration", "pgid", r.cmd.pgid, "peer", r.peer, "reason", why)
		return false
	}
	s.register(r.cmd)
	if _, ok := s.covered[r.cmd.pgid]; !ok {
		return false
	}
	s.by[r.cmd.pgid] = r.conn
	return true
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
		return "peer is in no covered group"
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
		if l, ok := s.covered[p.PGID]; ok {
			if holds, _ := s.holds(p.PGID, l); holds {
				return true
			}
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
	for pgid := range s.by {
		if _, ok := s.covered[pgid]; !ok || !groupExists(pgid) {
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

// serveNestConn reads a nested owner's lines and answers each with ok or refused; a line that is
// no register or unregister command is refused too.
func serveNestConn(c *net.UnixConn, id uint64, reqs chan<- nestRequest, done <-chan struct{}, log *slog.Logger) {
	defer c.Close()
	pid, uid, err := peerCred(c)
	if err != nil {
		log.Warn("supervise: refused nested connection", "err", err, "reason", "no peer credentials")
		return
	}
	lr := &lineReader{r: c}
	for {
		line, err := lr.next()
		if err == errLong {
			continue
		}
		if err != nil {
			return
		}
		cmd, ok := parseLine(line)
		if ok && (cmd.verb == verbRegister || cmd.verb == verbUnregister) {
			r := nestRequest{cmd: cmd, conn: id, peer: pid, uid: uid, reply: make(chan bool, 1)}
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
