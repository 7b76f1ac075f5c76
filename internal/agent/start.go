package agent

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/tag"
)

// startRequest is a start's fields.
type startRequest struct {
	Argv     []string           `json:"argv"`
	Env      *map[string]string `json:"env"`
	Cwd      string             `json:"cwd"`
	Purpose  *string            `json:"purpose"`
	Grace    *float64           `json:"grace"`
	Keep     bool               `json:"keep"`
	TagEnv   *string            `json:"tag_env"`
	GrantEnv string             `json:"grant_env"`
	Stdio    []string           `json:"stdio"`
	Fifos    string             `json:"fifos"`
	// Handles (Windows) are the client's own handle values for the "fd" entries, in order: the
	// agent duplicates each from the client's process (see passedIn).
	Handles []uint64 `json:"handles"`
}

// started is a start's (and an adopt's) result.
type started struct {
	PID         int      `json:"pid"`
	PGID        int      `json:"pgid"`
	CreateTime  float64  `json:"create_time"`
	Containment string   `json:"containment"`
	FDs         []string `json:"fds,omitempty"`
	// Handles (Windows) are the values, in the client's process, of the client's ends of the
	// "pipe" entries, in the order fds names them (see handOver).
	Handles []uint64 `json:"handles,omitempty"`
}

var streamNames = [3]string{"stdin", "stdout", "stderr"}

func (s *server) start(req request, f *frame) {
	var r startRequest
	if e := req.decode(&r); e != nil {
		f.closeFDs()
		s.fail(req.id, e)
		return
	}
	res, fds, e := s.startChild(r, f)
	if e != nil {
		s.fail(req.id, e)
		return
	}
	attach, e := s.handOver(&res.result, fds)
	if e != nil {
		closeAll(fds)
		s.finalStop(res.h)
		s.forget(res.h, true)
		s.fail(req.id, e)
		return
	}
	s.c.send(encodeReply(req.id, res.result), attach)
	closeAll(fds)
	s.watch(res.h)
}

// startResult is a started child and what its reply says.
type startResult struct {
	h      *held
	result started
}

// startChild checks a start, builds its command and starts it. The descriptors of f are used or
// closed; the returned ones are the client's ends of the pipes, to be sent and closed.
func (s *server) startChild(r startRequest, f *frame) (_ startResult, clientFDs []*os.File, _ *replyError) {
	if e := s.passedIn(r, f); e != nil {
		f.closeFDs()
		return startResult{}, nil, e
	}
	st, e := s.stdio(r, f)
	if e != nil {
		return startResult{}, nil, e
	}
	defer st.closeChildSide() // the child has its own copies once started
	ok := false
	defer func() {
		if !ok {
			st.closeClientSide()
		}
	}()
	v, e := s.check(r)
	if e != nil {
		return startResult{}, nil, e
	}
	cmd := &exec.Cmd{Path: v.path, Args: r.Argv, Env: v.env, Dir: r.Cwd}
	// A nil *os.File stored in Stdin's interface is not a nil interface: os/exec would hand the
	// child descriptor -1 (a closed stream) instead of the null device it opens for nil.
	if f := s.orNull(st.child[0]); f != nil {
		cmd.Stdin = f
	}
	if f := s.orNull(st.child[1]); f != nil {
		cmd.Stdout = f
	}
	if f := s.orNull(st.child[2]); f != nil {
		cmd.Stderr = f
	}
	owner := s.ownerFor(v.tagEnv)
	if s.isEnding() {
		return startResult{}, nil, errorf(codeStartFailed, "the agent is ending: its owner is gone")
	}
	// A burst of starts (a client starting 200 children at once) and the drops of the rows of
	// those that ended queue for the ledger lock in the ledger handle they share, which bounds
	// only the wait for another process's hold: none fails ledger-locked against another.
	child, err := owner.Start(context.Background(), cmd, custody.StartOptions{Purpose: v.purpose, Keep: r.Keep,
		GrantEnv: r.GrantEnv})
	if err != nil {
		return startResult{}, nil, startError(err)
	}
	h := &held{child: child, cmd: cmd, argv: r.Argv, purpose: v.purpose, grace: v.grace}
	if !s.hold(h) {
		s.finalStop(h)
		return startResult{}, nil, errorf(codeStartFailed, "the agent is ending: its owner is gone")
	}
	if g := child.EnvGrant(); g != nil {
		s.watchGrant(h, g)
	}
	ok = true
	return startResult{h: h, result: s.describe(child, cmd, st.names)}, st.client, nil
}

// orNull returns f, or the agent's null device for nil. os/exec would open and close the null
// device for each nil stream of each start (three opens, three closes); the agent's, opened
// once, is what every start's "null" streams share, each child getting its own copy at exec.
// Without it (it could not be opened) nil stays nil, for os/exec to open.
func (s *server) orNull(f *os.File) *os.File {
	if f == nil {
		return s.devNull
	}
	return f
}

// checkedStart is what a start's fields say, checked.
type checkedStart struct {
	path, purpose, tagEnv string
	env                   []string
	grace                 time.Duration
}

// check checks a start's fields other than stdio, and finds its program.
func (s *server) check(r startRequest) (v checkedStart, _ *replyError) {
	var e *replyError
	if v.grace, e = graceOf(r.Grace, s.cfg.Grace); e != nil {
		return v, e
	}
	if len(r.Argv) == 0 {
		return v, errorf(codeBadRequest, "argv: a non-empty array of strings is required")
	}
	v.purpose = "helper"
	if r.Purpose != nil {
		v.purpose = *r.Purpose
		if v.purpose == "" || strings.Contains(v.purpose, ":") {
			return v, errorf(codeBadRequest, "purpose %q: must be non-empty and hold no ':'", v.purpose)
		}
	}
	v.env = os.Environ()
	if r.Env != nil {
		v.env = nil
		for k, val := range *r.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(val, 0) {
				return v, errorf(codeBadRequest, "env: %q is not a variable", k)
			}
			v.env = append(v.env, k+"="+val)
		}
		if v.env == nil {
			v.env = []string{} // an empty environment, not the agent's (which nil means to os/exec)
		}
	}
	v.tagEnv = s.cfg.TagEnv
	if r.TagEnv != nil {
		if !tag.ValidEnvName(*r.TagEnv) {
			return v, errorf(codeBadRequest, "tag_env %q: not an environment variable name", *r.TagEnv)
		}
		v.tagEnv = *r.TagEnv
	}
	if r.Cwd != "" {
		if fi, err := os.Stat(r.Cwd); err != nil || !fi.IsDir() {
			return v, errorf(codeBadRequest, "cwd %q: not a directory", r.Cwd)
		}
	}
	if r.GrantEnv != "" && strings.ContainsAny(r.GrantEnv, "=\x00") {
		return v, errorf(codeBadRequest, "grant_env %q: not a variable name", r.GrantEnv)
	}
	v.path, e = lookPath(r.Argv[0], v.env, r.Cwd)
	return v, e
}

// describe is a started or adopted child's part of the reply.
func (s *server) describe(child *custody.Child, cmd *exec.Cmd, fds []string) started {
	res := started{PID: child.ID.PID, PGID: pgidOf(child, cmd), Containment: s.containment, FDs: fds}
	if inc, err := procid.Of(child.ID); err == nil {
		res.CreateTime = math.Round(inc.CreateTime*1000) / 1000
	}
	return res
}

// hold records a started child, unless the agent is ending.
func (s *server) hold(h *held) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ending {
		return false
	}
	s.children[h.child.ID.PID] = h
	return true
}

func (s *server) isEnding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ending
}

// graceOf reads a grace in seconds: a number > 0, or def when absent.
func graceOf(g *float64, def time.Duration) (time.Duration, *replyError) {
	if g == nil {
		return def, nil
	}
	if !(*g > 0) || *g > 1e6 {
		return 0, errorf(codeBadRequest, "grace %v: must be a number of seconds > 0", *g)
	}
	return time.Duration(*g * float64(time.Second)), nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// startError maps a failed start to its error code.
func startError(err error) *replyError {
	msg := strings.TrimPrefix(err.Error(), "custody: ")
	switch {
	case ledger.IsLocked(err):
		return errorf(codeLedgerLocked, "%s", msg)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, exec.ErrNotFound):
		return errorf(codeNotFound, "%s", msg)
	case errors.Is(err, fs.ErrPermission):
		return errorf(codePermissionDenied, "%s", msg)
	}
	return errorf(codeStartFailed, "%s", msg)
}

// watch sends the child's exit event once it has been reaped, after the reply to its start, and
// forgets it once its scope is empty.
func (s *server) watch(h *held) {
	s.watches.Go(func() {
		select {
		case <-h.child.Done():
		case <-s.closing:
			return
		}
		s.mu.Lock()
		h.exited = true // before the event: a list sent on reading it says so, however long the release takes
		forgotten := h.forgotten
		s.mu.Unlock()
		if !forgotten {
			code, sig := exitOf(h.child.Wait())
			s.event("exit", exitEvent{PID: h.child.ID.PID, Code: code, Signal: sig})
		}
		released := h.releaseSoon() == nil
		s.mu.Lock()
		h.ended = released
		s.mu.Unlock()
		if released {
			time.AfterFunc(keepEnded, func() { s.forget(h, false) })
		}
	})
}

// keepEnded is how long a child that exited, with its scope empty, is still known: a signal or a
// stop the client sent before it read the exit event is answered as for an exited child
// (delivered false, already-exited), not as for a PID the agent never held. A new child that gets
// the PID meanwhile takes its place.
const keepEnded = 10 * time.Minute

type exitEvent struct {
	PID    int  `json:"pid"`
	Code   *int `json:"code"`
	Signal *int `json:"signal"`
}

// exitOf reads how the leader ended from what Wait returned: its exit code, or the signal that
// killed it; neither when the OS did not say (an adopted child on an OS that tells its parent
// alone).
func exitOf(err error) (code, sig *int) {
	if err == nil {
		return new(0), nil
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return nil, new(int(ws.Signal()))
		}
		return new(ee.ExitCode()), nil
	}
	if ee, ok := errors.AsType[*custody.ExitError](err); ok {
		if ee.Signal != 0 {
			return nil, new(int(ee.Signal))
		}
		return new(ee.Code), nil
	}
	return nil, nil
}

// ownerFor returns the owner that stamps the tag in variable name, made at its first use: an
// Owner stamps one variable, and every owner of the agent shares its ledger and its supervisor.
func (s *server) ownerFor(name string) *custody.Owner {
	name = tag.EnvName(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.owners[name]
	if !ok {
		o = &custody.Owner{Ledger: s.cfg.Ledger, Install: s.cfg.Install, TagEnv: name, Supervisor: s.sup,
			Stop: custody.StopOptions{Grace: s.cfg.Grace}, Caller: s.cfg.Caller}
		s.owners[name] = o
	}
	return o
}
