package stop

import (
	"context"
	"errors"
	"syscall"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// Recorded stops the process rec names and the scope d describes (as a ledger row records them:
// see ledger.Row.Record and ledger.Row.ScopeDesc), for a stop by another process than the owner.
// A record is a claim, not a licence: nothing is signalled, and the outcome is [NoAuthority], when
// the PID is protected ([authority.Guard]: init, a kernel thread, the caller or an ancestor), when
// the recorded incarnation cannot be proven ([authority.Acquire]), when the process runs as
// another user than opts.Owner ([authority.CheckOwner]), or when the scope is not the recorded
// one ([scope.Open]). A process-group scope counts only when the process leads it; scope.Open
// pins its leader with a pidfd proven against the record where the kernel can, so the group's
// signals need no check at signal time (see scope.Scope.Signal). A cgroup scope whose cgroup was
// removed (which needs it empty) leaves the process alone. A cgroup emptied by the stop is
// removed.
func Recorded(ctx context.Context, rec procid.Record, d scope.Desc, opts Options) Result {
	t, s, res, ok := target(rec, d, opts)
	t, ok, swept := sweepStrays(t, s, res, ok, d, opts)
	defer swept()
	if !ok {
		return res
	}
	if t.Process != nil {
		defer t.Process.Close()
	}
	res = Stop(ctx, t, opts)
	if s != nil {
		if res.OK() {
			s.Close() // empty: this removes the cgroup
		} else {
			s.Release() // never a kill the outcome does not report
		}
	}
	return res
}

// target acquires the authority a stop acts through; ok is false when the outcome is already
// decided.
func target(rec procid.Record, d scope.Desc, opts Options) (t Target, s *scope.Scope, res Result, ok bool) {
	t.PID, res.PID = rec.PID, rec.PID
	if err := authority.Refuse(rec.PID); err != nil {
		_, r := t.outcomeOf(res, err, true)
		return t, nil, r, false
	}
	p, err := authority.Acquire(rec)
	if err == nil {
		// Read after the proof, through which the handle names the recorded process: a stranger
		// that took the PID since could only make this refuse, and the signals go through the
		// handle anyway.
		if err = authority.CheckOwner(rec.PID, opts.owner()); err != nil {
			p.Close()
			p = nil
		}
	}
	gone := errors.Is(err, procid.ErrGone)
	if err != nil && !gone {
		_, r := t.outcomeOf(res, err, true)
		return t, nil, r, false
	}
	t.Process = p
	if p != nil {
		d.Leader = p.ID()
	}
	if s, err = openScope(rec, d); err != nil {
		if p != nil {
			p.Close()
		}
		_, r := t.outcomeOf(res, err, true)
		return t, nil, r, false
	}
	if s != nil {
		t.Scope = s
	}
	if gone && s == nil {
		res.Outcome, res.Reason = AlreadyExited, "it had exited before the stop"
		return t, nil, res, false
	}
	return t, s, res, true
}

// openScope opens the scope a stop of rec's process reaches besides the process, or nil.
func openScope(rec procid.Record, d scope.Desc) (*scope.Scope, error) {
	switch d.Kind {
	case scope.KindGroup:
		if d.PGID != rec.PID {
			return nil, nil // a group the process does not lead is not its scope
		}
	case scope.KindCgroup:
	default:
		return nil, nil
	}
	s, err := scope.Open(d)
	if errors.Is(err, procid.ErrGone) {
		return nil, nil
	}
	return s, err
}

// Remains reports whether the scope d records for the process rec still holds processes now that
// the process is gone: a daemon its leader left in its cgroup, the members of the group it led. A
// stop or a reap of its row reaches them ([Recorded]); a listing shows the row for them. The
// scope is opened as a stop opens it, proven against the record, and only read: nothing is
// signalled, and a cgroup is let go, never closed (which would kill what is in it). Processes
// that left a process group, found only by the scope id in their environment, are not looked for
// here: that takes a pass over every process's environment.
func Remains(rec procid.Record, d scope.Desc) bool {
	s, err := openScope(rec, d)
	if err != nil || s == nil {
		return false
	}
	defer s.Release()
	// A group is asked as a signal would be sent (signal 0 delivers nothing): the number of a
	// group that emptied since may now be a stranger's group's, whose leader took the PID, and
	// the check refuses it, where emptiness by number alone would count its members.
	if d.Kind == scope.KindGroup && s.Signal(syscall.Signal(0)) != nil {
		return false
	}
	empty, err := s.Empty()
	return err == nil && !empty
}
