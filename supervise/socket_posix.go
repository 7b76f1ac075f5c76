//go:build linux || darwin

package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"time"

	"github.com/custody-dev/custody/internal/localsock"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// Bounds that keep the supervisor's memory fixed whatever the owner or a stranger sends.
const (
	maxReserved = 1024 // outstanding reservations; more are refused
	maxConns    = 64   // socket connections read at once; more are closed at once
	maxToken    = 128  // bytes of a token
)

// runSocket is run with the socket, which is made first: a supervisor that cannot listen changes
// nothing in its process before it fails.
func runSocket(cfg Config, path string) error {
	ln, err := listen(path)
	if err != nil {
		return err
	}
	defer ln.Close() // removes the socket file
	signal.Ignore(unix.SIGINT, unix.SIGHUP, unix.SIGPIPE)
	trimRuntime()
	if cfg.Logger == nil {
		cfg.Logger = stderrLogger()
	}
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		return fmt.Errorf("supervise: say ready: %w", err)
	}
	if err := signalReady(); err != nil {
		return err
	}
	return ServeSocket(context.Background(), os.Stdin, ln, cfg)
}

// listen makes the socket, reachable by its owner's user alone (see [localsock.Listen]). Only the
// socket's file is ever removed, and only one this listener made.
func listen(path string) (*net.UnixListener, error) {
	ln, err := localsock.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSocket, err)
	}
	return ln, nil
}

// stdinEvent is one line from the owner, or the end of its input.
type stdinEvent struct {
	line []byte
	err  error
}

// socketRequest is a register line read from a connection whose peer is the line's pid.
type socketRequest struct {
	token   string
	cmd     command
	peer    int       // the connected process, from its credentials
	expires time.Time // the connection's deadline: the request waits for its token until then
	reply   chan bool // buffered: the server never blocks on a connection that gave up
}

// socketServer is the server's state for the v2 socket: the reserved tokens, and the requests
// whose token the owner has not reserved yet. The owner reserves a token and then starts the
// child that uses it, but its line and the child's connection reach the supervisor on two paths,
// and the connection may come first: such a request waits for its token until its connection's
// deadline, so that the order in which the two paths are read can never refuse a registration.
type socketServer struct {
	*server
	reserved map[string]struct{}
	waiting  []socketRequest
}

func serveSocket(ctx context.Context, in io.Reader, ln *net.UnixListener, cfg Config) error {
	s := &socketServer{server: newServer(cfg), reserved: make(map[string]struct{})}
	done := make(chan struct{})
	defer close(done)
	lines := make(chan stdinEvent)
	reqs := make(chan socketRequest)
	go readOwner(in, lines, done)
	go acceptRegistrations(ln, reqs, done, s.log)
	for {
		var ev stdinEvent
		select { // the owner's lines, its end of input above all, go first
		case ev = <-lines:
		default:
			select {
			case ev = <-lines:
			case r := <-reqs:
				s.request(r)
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if s.ownerInput(ev.line, ev.err, s.handleOwner) {
			return nil
		}
	}
}

// readOwner passes the owner's lines, copied, and then its end of input.
func readOwner(in io.Reader, lines chan<- stdinEvent, done <-chan struct{}) {
	lr := &lineReader{r: in}
	for {
		line, err := lr.next()
		ev := stdinEvent{line: append([]byte(nil), line...), err: err}
		select {
		case lines <- ev:
		case <-done:
			return
		}
		if err != nil && err != errLong && err != errDying {
			return
		}
		if err == errDying {
			// The receiver must stop the scopes now: on the supervisor's one P it runs only
			// once this goroutine parks, and its next read (which arms the dying reader's wait)
			// would come first.
			runtime.Gosched()
		}
	}
}

// handleOwner takes reserve and cancel, and hands every other line to the protocol of the first form.
func (s *socketServer) handleOwner(line []byte) {
	var f [3][]byte
	n := fields(line, f[:])
	if n != 2 || len(f[1]) > maxToken || string(f[0]) != "reserve" && string(f[0]) != "cancel" {
		s.handle(line)
		return
	}
	token := string(f[1])
	s.expire()
	switch {
	case string(f[0]) == "cancel":
		delete(s.reserved, token)
	case len(s.reserved) >= maxReserved:
		s.log.Warn("supervise: refused reservation", "reason", "too many outstanding")
	default:
		s.reserved[token] = struct{}{}
		for i, r := range s.waiting {
			if r.token == token {
				s.waiting = slices.Delete(s.waiting, i, i+1)
				s.request(r)
				return
			}
		}
	}
}

// request answers a socket request, or keeps it waiting for its token.
func (s *socketServer) request(r socketRequest) {
	if _, ok := s.reserved[r.token]; !ok {
		s.expire()
		if len(s.waiting) < maxConns {
			s.waiting = append(s.waiting, r)
		} else {
			r.reply <- false
		}
		return
	}
	delete(s.reserved, r.token) // consumed by the attempt, whatever its outcome
	if r.peer != r.cmd.pid {
		s.log.Warn("supervise: refused socket registration", "pid", r.cmd.pid, "peer", r.peer, "reason", "peer is not pid")
		r.reply <- false
		return
	}
	r.reply <- s.registerLeader(r.cmd)
}

// expire drops the waiting requests whose connections have given up.
func (s *socketServer) expire() {
	now := time.Now()
	s.waiting = slices.DeleteFunc(s.waiting, func(r socketRequest) bool { return now.After(r.expires) })
}

// registerLeader covers the group a socket request names when pid leads it now, with that start.
func (s *server) registerLeader(cmd command) bool {
	if why := s.refuse(cmd.pgid); why != "" {
		s.log.Warn("supervise: refused target", "pgid", cmd.pgid, "reason", why)
		return false
	}
	inc, err := procid.Read(cmd.pid)
	switch {
	case err != nil:
		s.log.Warn("supervise: refused socket registration", "pid", cmd.pid, "err", err)
		return false
	case cmd.pid != cmd.pgid || inc.PGID != cmd.pgid:
		s.log.Warn("supervise: refused socket registration", "pid", cmd.pid, "pgid", cmd.pgid, "reason", "pid does not lead the group")
		return false
	case inc.Start != cmd.start:
		s.log.Warn("supervise: refused socket registration", "pid", cmd.pid, "reason", "start does not match")
		return false
	}
	s.register(cmd)
	_, ok := s.covered[cmd.pgid]
	return ok
}

// acceptRegistrations serves the socket: each connection is read by its own goroutine, at most
// maxConns at once, so that a silent one delays nobody.
func acceptRegistrations(ln *net.UnixListener, reqs chan<- socketRequest, done <-chan struct{}, log *slog.Logger) {
	slots := make(chan struct{}, maxConns)
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
		select {
		case slots <- struct{}{}:
			go func() {
				defer func() { <-slots }()
				serveConn(c, reqs, done, log)
			}()
		default:
			c.Close()
		}
	}
}

// serveConn reads one register line from c within SocketTimeout, checks that its pid is the
// peer, hands it to the server and answers ok when the group is covered. Anything else closes c
// without an answer.
func serveConn(c *net.UnixConn, reqs chan<- socketRequest, done <-chan struct{}, log *slog.Logger) {
	defer c.Close()
	expires := time.Now().Add(SocketTimeout)
	c.SetDeadline(expires)
	line, err := (&lineReader{r: c}).next()
	if err != nil {
		log.Debug("supervise: socket connection without a line", "err", err)
		return
	}
	token, cmd, ok := parseSocketRegister(line)
	if !ok {
		log.Warn("supervise: refused socket registration", "reason", "malformed line")
		return
	}
	peer, err := localsock.PeerCred(c)
	if err != nil {
		log.Warn("supervise: refused socket registration", "pid", cmd.pid, "err", err, "reason", "no peer credentials")
		return
	}
	r := socketRequest{token: token, cmd: cmd, peer: peer.PID, expires: expires, reply: make(chan bool, 1)}
	timeout := time.NewTimer(time.Until(expires))
	defer timeout.Stop()
	select {
	case reqs <- r:
	case <-done:
		return
	case <-timeout.C:
		return
	}
	select {
	case ok = <-r.reply:
	case <-done:
		return
	case <-timeout.C:
		log.Warn("supervise: refused socket registration", "pid", cmd.pid, "reason", "token not reserved")
		return
	}
	if ok {
		c.Write([]byte("ok\n"))
	}
}

// parseSocketRegister parses "register <token> <pid> <pgid> <start>", start in ticks.
func parseSocketRegister(line []byte) (string, command, bool) {
	var f [6][]byte
	if fields(line, f[:]) != 5 || string(f[0]) != "register" || len(f[1]) > maxToken {
		return "", command{}, false
	}
	pid, ok1 := parseID(f[2])
	pgid, ok2 := parseID(f[3])
	start, known, ok3 := parseStart(f[4])
	if !ok1 || !ok2 || !ok3 || !known {
		return "", command{}, false
	}
	return string(f[1]), command{verb: verbRegister, pid: pid, pgid: pgid, start: start, known: true}, true
}
