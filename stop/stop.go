// Package stop ends a process, or its whole scope, through proven authority and reports what
// really happened as one of five outcomes. A signal that was accepted is never reported as an
// exit: [Exited] means the exit was observed (and, for a group, that no member is left).
//
// A stop asks the scope to exit, waits up to the grace for everything to exit, then kills it and
// waits a little longer. The caller's context bounds the whole stop: a deadline shorter than the
// process's shutdown gives [TimedOut], and the retained handle can still observe the exit later.
// [Result] says how it ended: the request sent ([Result.Request]) and whether the kill was needed
// ([Result.Forced]).
//
//	OS       the request (Request)                           the kill
//	Unix     SIGTERM to the scope (cgroup, process group),   SIGKILL
//	         or the process
//	Windows  a child's owner: CTRL_BREAK_EVENT to the        TerminateJobObject, or
//	         console process group the child leads, and      TerminateProcess
//	         WM_CLOSE to the top-level windows of every
//	         process in its job; anyone else: WM_CLOSE to
//	         the process's top-level windows
//
// Windows has no SIGTERM. When no request can reach the process (a console program stopped by
// another process than its owner, a windowless program of an owner without a console), the stop
// kills at once, and says why in [Result.Reason].
package stop

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
)

// Outcome is the typed result of a stop.
type Outcome int

const (
	Exited           Outcome = iota + 1 // seen to exit after the stop (a group: every member)
	AlreadyExited                       // had exited before the stop; nothing was signalled
	NoAuthority                         // identity unproven; nothing was signalled
	PermissionDenied                    // the OS refused the signal
	TimedOut                            // signalled, but the exit was not seen before the deadline
)

var outcomeNames = map[Outcome]string{Exited: "exited", AlreadyExited: "already-exited",
	NoAuthority: "no-authority", PermissionDenied: "permission-denied", TimedOut: "timed-out"}

func (o Outcome) String() string {
	if s, ok := outcomeNames[o]; ok {
		return s
	}
	return "unknown"
}

// MarshalText makes an Outcome read as its word in JSON.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Result is what one stop did.
type Result struct {
	PID     int     `json:"pid"`
	Outcome Outcome `json:"outcome"`
	// Request names the request to exit sent first: "SIGTERM", "WM_CLOSE", "CTRL_BREAK_EVENT"
	// or "CTRL_BREAK_EVENT+WM_CLOSE" (see [authority.AskSIGTERM]); empty when none was sent.
	Request string `json:"request,omitempty"`
	Forced  bool   `json:"forced"` // the kill was needed: SIGKILL, TerminateJobObject or TerminateProcess
	// Reason says why, for every outcome but exited, and why no request was sent when none was.
	Reason string `json:"reason,omitempty"`
}

// OK reports whether the process is provably gone: [Exited] or [AlreadyExited].
func (r Result) OK() bool { return r.Outcome == Exited || r.Outcome == AlreadyExited }

// Options tunes a stop. The zero value uses the defaults.
type Options struct {
	Grace    time.Duration // between the request and the kill; default [DefaultGrace]
	KillWait time.Duration // after the kill, how long to wait for the exit; default 2 s
	// Owner, for [Recorded], is the uid the row's process must run as: the owner of the ledger the row
	// was read from ([ledger.Ledger.Owner]). Nil means the caller's uid. Unused on Windows.
	Owner *int
	// ScopeID, for [Recorded], is the scope id the row records (ledger.Row.ScopeID): on the
	// process-group path the stop also reaches the processes of Owner whose environment carries
	// it, each proven through a pidfd first (see scope.FindStrays). Empty reaches none.
	ScopeID string
}

const (
	// DefaultGrace is the one default time between the request and the kill, for a stop and for
	// the supervisor's stop at the owner's death alike (see [Grace]).
	DefaultGrace    = 3 * time.Second
	DefaultKillWait = 2 * time.Second
)

// Grace returns d, or [DefaultGrace] when d is not positive: the default every grace takes.
func Grace(d time.Duration) time.Duration { return orDefault(d, DefaultGrace) }

func (o Options) grace() time.Duration    { return Grace(o.Grace) }
func (o Options) killWait() time.Duration { return orDefault(o.KillWait, DefaultKillWait) }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Scope is what a stop signals as a unit besides the process: a scope.Scope (a process group,
// proven through its leader's pidfd or re-proven before each signal, a cgroup or a job). Ask sends the
// request to exit and names it, Signal is given [os.Kill]; both return an error wrapping
// procid.ErrGone when nothing is left. Wait returns nil once the scope is empty.
type Scope interface {
	Ask() (string, error)
	Signal(os.Signal) error
	Wait(context.Context) error
}

// Target is the authority a stop acts through: a proven process, and its scope when it has one.
// Process is nil when the process had already exited (its scope's members may live on).
type Target struct {
	PID     int
	Process *authority.Process
	Scope   Scope
}

// Stop stops t and reports the outcome. It never signals anything but t's process or scope.
func Stop(ctx context.Context, t Target, opts Options) Result {
	res := Result{PID: t.PID}
	request, err := t.ask()
	if errors.Is(err, errors.ErrUnsupported) { // Windows: nothing but the kill reaches it
		res.Reason = "killed at once: " + err.Error()
		return t.kill(ctx, res, opts)
	}
	if done, r := t.outcomeOf(res, err, true); done {
		return r
	}
	res.Request = request
	graceCtx, cancel := context.WithTimeout(ctx, opts.grace())
	err = t.wait(graceCtx)
	cancel()
	if err == nil {
		res.Outcome = Exited
		return res
	}
	if ctx.Err() != nil {
		return timedOut(res, "the deadline came before the exit, during the grace after "+request)
	}
	return t.kill(ctx, res, opts)
}

func (t Target) kill(ctx context.Context, res Result, opts Options) Result {
	res.Forced = true
	if done, r := t.outcomeOf(res, t.signal(os.Kill), false); done {
		return r
	}
	killCtx, cancel := context.WithTimeout(ctx, opts.killWait())
	defer cancel()
	if err := t.wait(killCtx); err != nil {
		return timedOut(res, "no exit seen after the kill: "+err.Error())
	}
	res.Outcome = Exited
	return res
}

// outcomeOf classifies a signal's error; done is false when the signal went out and the stop goes
// on. first says whether this was the stop's first signal (a gone target then had exited before).
func (t Target) outcomeOf(res Result, err error, first bool) (done bool, r Result) {
	switch {
	case err == nil:
		return false, res
	case errors.Is(err, procid.ErrGone):
		res.Outcome = Exited
		if first {
			res.Outcome, res.Reason = AlreadyExited, "it had exited before the stop"
		}
		return true, res
	case errors.Is(err, authority.ErrNoAuthority):
		res.Outcome, res.Reason = NoAuthority, err.Error()
	case errors.Is(err, os.ErrPermission):
		res.Outcome, res.Reason = PermissionDenied, err.Error()
	default:
		res.Outcome, res.Reason = NoAuthority, err.Error()
	}
	return true, res
}

func timedOut(res Result, reason string) Result {
	res.Outcome, res.Reason = TimedOut, reason
	return res
}

// ask sends the request to exit to the scope when there is one, else to the process.
func (t Target) ask() (string, error) {
	if t.Scope != nil {
		return t.Scope.Ask()
	}
	if t.Process == nil {
		return "", procid.ErrGone
	}
	return t.Process.Ask()
}

// signal sends sig to the scope when there is one, else to the process.
func (t Target) signal(sig os.Signal) error {
	if t.Scope != nil {
		return t.Scope.Signal(sig)
	}
	if t.Process == nil {
		return procid.ErrGone
	}
	return t.Process.Signal(sig)
}

// wait returns nil once the process has exited and its scope, if any, is empty.
func (t Target) wait(ctx context.Context) error {
	if t.Process != nil {
		if err := t.Process.Wait(ctx); err != nil {
			return err
		}
	}
	if t.Scope != nil {
		return t.Scope.Wait(ctx)
	}
	return nil
}

func (o Options) owner() int {
	if o.Owner != nil {
		return *o.Owner
	}
	return os.Getuid()
}
