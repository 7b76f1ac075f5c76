package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/reaper"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
)

// server is one agent serving one client.
type server struct {
	cfg         Config
	c           *conn
	owners      map[string]*custody.Owner // by the tag variable they stamp; see ownerFor
	sup         *supervise.Client
	containment string
	fifos       *fifoStore
	devNull     *os.File // the null device, read-write, for every start's "null" streams (see orNull); nil if it could not be opened

	mu       sync.Mutex
	children map[int]*held
	ending   bool

	requests sync.WaitGroup // requests being served
	work     chan frame     // a request for a worker idle in work (see readLoop)
	watches  sync.WaitGroup // children whose exit is awaited, grants whose end is

	// closing is closed once the final stops are done: a watch still waiting then (a child handed
	// over, one whose stop could not be proven, a grant still served) ends without its event.
	closing chan struct{}
}

// held is one child the agent holds.
type held struct {
	child   *custody.Child
	cmd     *exec.Cmd // nil for an adopted child
	argv    []string
	purpose string
	grace   time.Duration

	exited    bool // the leader exited; members of its scope may remain
	ended     bool // exited and released (its scope empty): kept a while for late requests (see keepEnded)
	forgotten bool // released or handed over: no exit event, not in list
}

// serve serves the client at the other end of c until it ends: until c reaches end of file (or
// fails), or cfg.OwnerDone is closed. Then it stops every child still held, concurrently, each with
// its own grace, drops their rows, closes c and returns. Its error is what the final stop could
// not do; a child whose exit could not be proven keeps its row, for reap.
func serveConn(c *conn, cfg Config) error {
	if cfg.Grace <= 0 {
		cfg.Grace = stop.DefaultGrace
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	s := &server{cfg: cfg, c: c, children: map[int]*held{}, work: make(chan frame), closing: make(chan struct{})}
	kind, _, _ := scope.Containment()
	s.containment = kind.Containment()
	s.sup = &supervise.Client{Grace: cfg.Grace, Notify: s.coverage}
	s.owners = map[string]*custody.Owner{}
	s.fifos = newFifoStore()
	if f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		s.devNull = f
		defer f.Close() // after end: no start is under way then
	}

	s.event("hello", hello{Protocol: Protocol, Version: cfg.Version, PID: os.Getpid(), Containment: s.containment,
		Capabilities: capabilities, MaxLine: MaxLine})
	// The agent is the child subreaper of everything its children start: on the process-group
	// path (no cgroup) a descendant whose parent exits then stays among the agent's
	// descendants, and its orphans are the agent's to reap, never a child its own waiter reaps.
	orphans, err := reaper.Start()
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintf(s.cfg.Stderr, "custody: warning: agent: %v\n", err)
	}
	defer orphans.Close()
	hangup := make(chan struct{})
	go s.readLoop(hangup)
	select {
	case <-hangup:
	case <-cfg.OwnerDone:
		// Another process may hold a copy of the connection: whatever it sends is not read, and
		// no request starts once the end has begun.
		c.stopReading()
		<-hangup
	}
	return s.end()
}

type hello struct {
	Protocol     int      `json:"protocol"`
	Version      string   `json:"version"`
	PID          int      `json:"pid"`
	Containment  string   `json:"containment"`
	Capabilities []string `json:"capabilities"`
	MaxLine      int      `json:"max_line"`
}

// readLoop reads requests until the connection ends, each served on a goroutine of its own: a
// worker idle since it served an earlier one, or a new one.
func (s *server) readLoop(hangup chan<- struct{}) {
	defer close(hangup)
	sp := newSplitter()
	defer sp.close()
	for {
		frames, err := s.c.read(sp)
		for _, f := range frames {
			s.requests.Add(1)
			select {
			case s.work <- f:
			default:
				go s.worker(f)
			}
		}
		if err != nil {
			return
		}
	}
}

// workerIdle is how long a worker waits for another request before it ends.
const workerIdle = 10 * time.Second

// worker serves f, then the requests handed to it while it waits idle. A start runs deep (a
// request's JSON, the owned start, the ledger's write): a new goroutine's stack grows to it by
// copies, some 15 µs of a start's path before its child's fork here, where a worker's has grown
// already.
func (s *server) worker(f frame) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		s.serve(f)
		s.requests.Done()
		idle.Reset(workerIdle)
		select {
		case f = <-s.work:
		case <-idle.C:
			return
		case <-s.closing:
			return
		}
	}
}

// serve answers one line.
func (s *server) serve(f frame) {
	if f.tooLong {
		f.closeFDs()
		s.fail(null, errorf(codeLineTooLong, "the line exceeded %d bytes; it was discarded", MaxLine))
		return
	}
	req, rerr := parseRequest(f.line)
	if rerr != nil {
		f.closeFDs()
		s.fail(req.id, rerr)
		return
	}
	op, ok := ops[req.op]
	if !ok {
		f.closeFDs()
		s.fail(req.id, errorf(codeUnknownOp, "%q is not a request this agent serves", req.op))
		return
	}
	op(s, req, &f)
}

type opFunc func(s *server, req request, f *frame)

var ops map[string]opFunc

func init() {
	ops = map[string]opFunc{
		"start":   (*server).start,
		"fifos":   (*server).makeFifos,
		"signal":  (*server).signal,
		"stop":    (*server).stop,
		"release": (*server).release,
		"grant":   (*server).grant,
		"adopt":   (*server).adopt,
		"list":    (*server).list,
		"ping":    (*server).ping,
	}
}

// noFDs refuses descriptors sent with a request that declares none, and closes them.
func (s *server) noFDs(req request, f *frame) bool {
	if len(f.fds) == 0 && !f.lostFDs {
		return true
	}
	n := len(f.fds)
	f.closeFDs()
	s.fail(req.id, errorf(codeFDMismatch, "%s declares no descriptors, but %d came with it", req.op, n))
	return false
}

func (s *server) ok(id json.RawMessage, result any) {
	s.c.send(encodeReply(id, result), nil) // a client gone cannot be told; its end is seen by the read
}

func (s *server) fail(id json.RawMessage, e *replyError) { s.c.send(encodeFailure(id, e), nil) }

func (s *server) event(name string, fields any) { s.c.send(encodeEvent(name, fields), nil) }

// coverage turns the supervisor's losses and returns into events.
func (s *server) coverage(lost error) {
	if lost != nil {
		fmt.Fprintf(s.cfg.Stderr, "custody: warning: agent: %v\n", lost)
		s.event("lost-cover", struct {
			Message string `json:"message"`
		}{lost.Error()})
		return
	}
	s.event("covered", nil)
}

// lookup returns the child a request names.
func (s *server) lookup(pid int) (*held, *replyError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.children[pid]
	if !ok || h.forgotten {
		return nil, errorf(codeNoSuchChild, "pid %d names no child this agent holds", pid)
	}
	return h, nil
}

// end stops every child still held, concurrently, each with its grace, then closes the owner.
func (s *server) end() error {
	s.mu.Lock()
	s.ending = true
	var all []*held
	for _, h := range s.children {
		if !h.forgotten {
			all = append(all, h)
		}
	}
	s.mu.Unlock()
	var errs []error
	var emu sync.Mutex
	var wg sync.WaitGroup
	for _, h := range all {
		wg.Go(func() {
			if err := s.finalStop(h); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	// A client that hung up reads no more: a reply still being written must not hold the end.
	s.c.limitWrites(time.Second)
	s.requests.Wait()
	close(s.closing)
	s.fifos.close()
	for _, o := range s.owners {
		errs = append(errs, o.Close())
	}
	errs = append(errs, s.sup.Close())
	s.watches.Wait()
	s.c.close()
	return errors.Join(errs...)
}

// stop stops the child with grace. A release meanwhile (the client's, or the watch's once the
// child exited) waits for it: Child.Release keeps the handles a Stop uses.
func (h *held) stop(grace time.Duration) custody.StopResult {
	return h.child.Stop(context.Background(), custody.StopOptions{Grace: grace})
}

func (h *held) release() error { return h.child.Release(context.Background()) }

// releaseSoon is release for a child that exited: its row's drop goes with the agent's next
// ledger write (a burst of short children costs one write each, not two; see
// custody.Child.ReleaseSoon).
func (h *held) releaseSoon() error { return h.child.ReleaseSoon(context.Background()) }

// finalStop stops a child at the agent's end.
func (s *server) finalStop(h *held) error {
	res := h.stop(h.grace)
	if !res.OK() {
		fmt.Fprintf(s.cfg.Stderr, "custody: warning: agent: pid %d: %s: %s\n", h.child.ID.PID, res.Outcome, res.Reason)
		return fmt.Errorf("agent: stop pid %d: %s: %s", h.child.ID.PID, res.Outcome, res.Reason)
	}
	return nil
}
