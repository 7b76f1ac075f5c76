package agent

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/procid"
)

// pidRequest is the field every request about one child has.
type pidRequest struct {
	PID *int `json:"pid"`
}

// fields decodes req's fields into a T, or answers req with why they do not decode and reports
// false: the first step of every request that takes fields.
func fields[T any](s *server, req request) (T, bool) {
	var r T
	e := req.decode(&r)
	if e != nil {
		s.fail(req.id, e)
	}
	return r, e == nil
}

// childWith decodes a request about one child that takes fields T: the child its pid names and
// the fields, or the request answered and false.
func childWith[T any](s *server, req request, f *frame) (*held, T, bool) {
	h, ok := s.child(req, f)
	if !ok {
		var none T
		return nil, none, false
	}
	r, ok := fields[T](s, req)
	return h, r, ok
}

// child decodes a request's pid and returns the child it names.
func (s *server) child(req request, f *frame) (*held, bool) {
	if !s.noFDs(req, f) {
		return nil, false
	}
	r, ok := fields[pidRequest](s, req)
	if !ok {
		return nil, false
	}
	if r.PID == nil {
		s.fail(req.id, errorf(codeBadRequest, "pid: required"))
		return nil, false
	}
	h, e := s.lookup(*r.PID)
	if e != nil {
		s.fail(req.id, e)
		return nil, false
	}
	return h, true
}

type signalRequest struct {
	Signal any    `json:"signal"`
	Target string `json:"target"`
}

func (s *server) signal(req request, f *frame) {
	h, r, ok := childWith[signalRequest](s, req, f)
	if !ok {
		return
	}
	sig, e := parseSignal(r.Signal)
	if e != nil {
		s.fail(req.id, e)
		return
	}
	var err error
	switch r.Target {
	case "", "scope":
		err = h.child.Signal(sig)
	case "leader":
		err = s.signalLeader(h, sig)
	default:
		s.fail(req.id, errorf(codeBadRequest, "target %q: want scope or leader", r.Target))
		return
	}
	switch {
	case err == nil:
		s.ok(req.id, struct {
			Delivered bool `json:"delivered"`
		}{true})
	case errors.Is(err, os.ErrProcessDone), errors.Is(err, syscall.ESRCH), errors.Is(err, procid.ErrGone),
		errors.Is(err, os.ErrClosed):
		// ErrClosed: the child exited and was released meanwhile, its handles closed.
		s.ok(req.id, struct {
			Delivered bool `json:"delivered"`
		}{false})
	case errors.Is(err, errAdoptedLeader), errors.Is(err, errors.ErrUnsupported):
		s.fail(req.id, errorf(codeUnsupported, "signal pid %d: %v", h.child.ID.PID, err))
	case errors.Is(err, syscall.EPERM):
		s.fail(req.id, errorf(codePermissionDenied, "%v", err))
	default:
		s.fail(req.id, errorf(codeBadRequest, "signal pid %d: %v", h.child.ID.PID, err))
	}
}

// signalLeader signals the child alone, through the handle os/exec retained at its spawn (a pidfd
// on Linux: once the child is reaped it refuses, with os.ErrProcessDone, rather than reach a
// process that took the PID since). An adopted child has no such handle here.
func (s *server) signalLeader(h *held, sig syscall.Signal) error {
	select {
	case <-h.child.Done():
		return os.ErrProcessDone
	default:
	}
	if h.cmd == nil {
		return errAdoptedLeader
	}
	return h.cmd.Process.Signal(sig)
}

// errAdoptedLeader refuses a signal to an adopted child's leader alone: the agent holds no
// handle of its own on the process, only on its scope.
var errAdoptedLeader = errors.New("an adopted child is signalled as a scope only")

// parseSignal reads a signal name ("SIGTERM", "TERM") or number.
func parseSignal(v any) (syscall.Signal, *replyError) {
	switch v := v.(type) {
	case float64:
		if v != float64(int(v)) || v < 0 || v > 64 {
			return 0, errorf(codeBadRequest, "signal %v: not a signal number", v)
		}
		return syscall.Signal(int(v)), nil
	case string:
		name := strings.ToUpper(v)
		if n, err := strconv.Atoi(name); err == nil {
			return parseSignal(float64(n))
		}
		if !strings.HasPrefix(name, "SIG") {
			name = "SIG" + name
		}
		if sig := signalByName(name); sig != 0 {
			return sig, nil
		}
		return 0, errorf(codeBadRequest, "signal %q: not a signal name", v)
	case nil:
		return 0, errorf(codeBadRequest, "signal: required")
	}
	return 0, errorf(codeBadRequest, "signal: want a name or a number")
}

type stopRequest struct {
	Grace *float64 `json:"grace"`
}

func (s *server) stop(req request, f *frame) {
	h, r, ok := childWith[stopRequest](s, req, f)
	if !ok {
		return
	}
	grace, e := graceOf(r.Grace, h.grace)
	if e != nil {
		s.fail(req.id, e)
		return
	}
	res := h.stop(grace)
	if res.OK() {
		s.forget(h, false)
	}
	s.ok(req.id, struct {
		Outcome   string `json:"outcome"`
		Requested bool   `json:"requested"`
		Forced    bool   `json:"forced"`
		Reason    string `json:"reason"`
	}{res.Outcome.String(), res.Request != "", res.Forced, res.Reason})
}

// forget drops a child from the agent's table; silent also withholds its exit event.
func (s *server) forget(h *held, silent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if silent {
		h.forgotten = true
	}
	if s.children[h.child.ID.PID] == h {
		delete(s.children, h.child.ID.PID)
	}
}

func (s *server) release(req request, f *frame) {
	h, ok := s.child(req, f)
	if !ok {
		return
	}
	if err := h.release(); err != nil {
		s.fail(req.id, errorf(codeRunning, "%s", strings.TrimPrefix(err.Error(), "custody: ")))
		return
	}
	s.forget(h, true)
	s.ok(req.id, nil)
}

type grantRequest struct {
	TTL *float64 `json:"ttl"`
}

func (s *server) grant(req request, f *frame) {
	h, r, ok := childWith[grantRequest](s, req, f)
	if !ok {
		return
	}
	var ttl time.Duration
	if r.TTL != nil {
		if !(*r.TTL > 0) || *r.TTL > 86400 {
			s.fail(req.id, errorf(codeBadRequest, "ttl %v: must be a number of seconds > 0", *r.TTL))
			return
		}
		ttl = time.Duration(*r.TTL * float64(time.Second))
	}
	g, err := h.child.Grant(custody.GrantOptions{TTL: ttl})
	if err != nil {
		s.fail(req.id, errorf(codeBadRequest, "%s", strings.TrimPrefix(err.Error(), "custody: ")))
		return
	}
	s.ok(req.id, struct {
		Grant string `json:"grant"`
	}{g.String()})
	s.watchGrant(h, g)
}

// watchGrant sends the handed event and forgets the child once a receiver has redeemed g.
func (s *server) watchGrant(h *held, g *custody.Grant) {
	s.watches.Go(func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		res, _ := g.Wait(ctx)
		if res.Outcome != custody.Transferred {
			return
		}
		s.forget(h, true)
		s.event("handed", struct {
			PID      int `json:"pid"`
			Receiver int `json:"receiver"`
		}{h.child.ID.PID, res.Receiver})
	})
}

type adoptRequest struct {
	Grant *string  `json:"grant"`
	Grace *float64 `json:"grace"`
}

func (s *server) adopt(req request, f *frame) {
	if !s.noFDs(req, f) {
		return
	}
	r, ok := fields[adoptRequest](s, req)
	if !ok {
		return
	}
	if r.Grant == nil {
		s.fail(req.id, errorf(codeBadRequest, "grant: required"))
		return
	}
	grace, e := graceOf(r.Grace, s.cfg.Grace)
	if e != nil {
		s.fail(req.id, e)
		return
	}
	if s.isEnding() {
		s.fail(req.id, errorf(codeGrantRefused, "the agent is ending: its owner is gone"))
		return
	}
	child, err := s.ownerFor(s.cfg.TagEnv).Adopt(context.Background(), *r.Grant)
	if err != nil {
		code := codeGrantRefused
		if errors.Is(err, custody.ErrClosed) {
			code = codeStartFailed
		}
		s.fail(req.id, errorf(code, "%s", strings.TrimPrefix(err.Error(), "custody: ")))
		return
	}
	argv, _ := procid.Cmdline(child.ID.PID)
	h := &held{child: child, argv: argv, purpose: "adopted", grace: grace}
	if !s.hold(h) {
		s.finalStop(h)
		s.fail(req.id, errorf(codeStartFailed, "the agent is ending: its owner is gone"))
		return
	}
	s.ok(req.id, s.describe(child, nil, nil))
	s.watch(h)
}

func (s *server) list(req request, f *frame) {
	if !s.noFDs(req, f) {
		return
	}
	type entry struct {
		PID         int      `json:"pid"`
		Argv        []string `json:"argv"`
		Purpose     string   `json:"purpose"`
		Containment string   `json:"containment"`
		State       string   `json:"state"`
	}
	s.mu.Lock()
	children := make([]entry, 0, len(s.children))
	for pid, h := range s.children {
		if h.forgotten || h.ended {
			continue
		}
		state := "running"
		if h.exited {
			state = "exited"
		}
		children = append(children, entry{pid, h.argv, h.purpose, s.containment, state})
	}
	s.mu.Unlock()
	s.ok(req.id, struct {
		Children []entry `json:"children"`
	}{children})
}

func (s *server) ping(req request, f *frame) {
	if !s.noFDs(req, f) {
		return
	}
	s.ok(req.id, nil)
}
