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
// led by that process. Authority is acquired and proven first (see [authority.Acquire]); without
// it nothing is signalled and the outcome is [NoAuthority].
func Row(ctx context.Context, row ledger.Row, opts Options) Result {
	t, res, ok := target(row)
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
func target(row ledger.Row) (t Target, res Result, ok bool) {
	t.PID, res.PID = row.PID, row.PID
	p, err := authority.Acquire(row.Record())
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
		} else if row.StartTicks != nil {
			leader.Start = *row.StartTicks
		}
		t.Scope = authority.Group{PGID: row.PID, Leader: leader}
	}
	if gone && t.Scope == nil {
		res.Outcome, res.Reason = AlreadyExited, "it had exited before the stop"
		return t, res, false
	}
	return t, res, true
}
