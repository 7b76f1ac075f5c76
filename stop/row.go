package stop

import (
	"context"
	"errors"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// ScopePgrp is the ledger's scope value for a row whose scope is its process group.
const ScopePgrp = "pgrp"

// Row stops the process a ledger row names, and its process group when the row's scope is one
// led by that process. A row is a claim, not a licence: nothing is signalled, and the outcome is
// [NoAuthority], when the PID is protected ([authority.Guard]: init, a kernel thread, the caller
// or an ancestor), when the recorded incarnation cannot be proven ([authority.Acquire]), or when
// the process runs as another user than opts.Owner ([authority.CheckOwner]).
func Row(ctx context.Context, row ledger.Row, opts Options) Result {
	t, res, ok := target(row, opts)
	if !ok {
		return res
	}
	if t.Process != nil {
		defer t.Process.Close()
	}
	return Stop(ctx, t, opts)
}

// target acquires the authority a row's stop acts through; ok is false when the outcome is
// already decided.
func target(row ledger.Row, opts Options) (t Target, res Result, ok bool) {
	t.PID, res.PID = row.PID, row.PID
	if err := authority.Refuse(row.PID); err != nil {
		_, r := t.settle(res, err, true)
		return t, r, false
	}
	p, err := authority.Acquire(row.Record())
	if err == nil {
		// Read after the proof, through which the handle names the recorded process: a stranger
		// that took the PID since could only make this refuse, and the signals go through the
		// handle anyway.
		if err = authority.CheckOwner(row.PID, opts.owner()); err != nil {
			p.Close()
			p = nil
		}
	}
	gone := errors.Is(err, procid.ErrGone)
	if err != nil && !gone {
		_, r := t.settle(res, err, true)
		return t, r, false
	}
	t.Process = p
	if row.Scope == ScopePgrp && row.PGID != nil && *row.PGID == row.PID {
		leader := procid.ID{PID: row.PID}
		if p != nil {
			leader = p.ID()
		} else {
			if row.StartTicks != nil {
				leader.Start = *row.StartTicks
			}
			leader.PidfdID = row.Record().PidfsID()
		}
		t.Scope = authority.Group{PGID: row.PID, Leader: leader}
	}
	if gone && t.Scope == nil {
		res.Outcome, res.Reason = AlreadyExited, "it had exited before the stop"
		return t, res, false
	}
	return t, res, true
}
