package authority

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/custody-dev/custody/procid"
)

// prove decides, after a handle on rec.PID was opened (or, without a handle, at the moment of
// acquisition), whether rec's incarnation holds the PID, and returns the incarnation read.
//
// Why the handle then names the recorded process R: R started before the handle was opened (it
// was recorded), and the read below, taken after the open, shows R alive. A process that is alive
// at two instants held its PID throughout, so at the open the PID was R's, and the handle names
// R. The read comes before Check, so by the same argument the incarnation it returns is R's too
// (a read after Check could meet a stranger that took the PID in between, and checked mode would
// then re-prove the stranger before each signal). The limit is the proof's resolution: a
// stranger that took the PID within the clock tick R started in has R's start ticks (see package
// procid), and an epoch proof accepts any process started within 2 s of R's create time, unless
// pidfs ids settle it (below).
//
// handleExited, when not nil, reports whether the process the handle names has exited. Either
// that or an absent PID at the read proves R dead, whoever the handle names: if it is not R, then
// R had already died when the handle was opened.
//
// handleID is the pidfs id of the process the handle names (0 without one). When the record has
// one too, they decide, with no /proc read: equal, the handle is R's; different, it is another
// process's, however equal its start ticks (the tick limit above is gone).
func prove(rec procid.Record, handleExited func() bool, handleID uint64) (procid.ID, error) {
	if want := rec.PidfsID(); want != 0 && handleID != 0 {
		return proveByID(rec, handleExited, handleID, want)
	}
	id, err := proveByStart(rec, handleExited)
	if err == nil {
		id.PidfdID = handleID
	}
	return id, err
}

// proveByID is prove by pidfs ids.
func proveByID(rec procid.Record, handleExited func() bool, got, want uint64) (procid.ID, error) {
	if handleExited != nil && handleExited() {
		// Whoever the handle names, R is not alive: it exited, or another process holds its PID.
		return procid.ID{}, fmt.Errorf("authority: acquire pid %d: %w", rec.PID, procid.ErrGone)
	}
	if got != want {
		return procid.ID{}, fmt.Errorf("%w over pid %d: %w: now pidfs id %d, recorded %d (%s)",
			ErrNoAuthority, rec.PID, procid.ErrReused, got, want, describe(rec))
	}
	id := procid.ID{PID: rec.PID, PidfdID: got}
	if rec.StartTicks != nil {
		id.Start = *rec.StartTicks
	} else if inc, err := procid.Read(rec.PID); err == nil { // for display: the id is the proof
		id.Start = inc.Start
	}
	return id, nil
}

// proveByStart is prove by start: exact ticks, or the epoch rule.
func proveByStart(rec procid.Record, handleExited func() bool) (procid.ID, error) {
	// Fast path, one read: an exact proof of a record that carries start ticks means the live
	// start equals them (procid prefers start ticks over boot_start), so the ID is known without
	// a read of our own.
	if rec.StartTicks != nil {
		if state, proof := rec.Check(true); state == procid.Alive && proof == procid.ExactProof {
			return procid.ID{PID: rec.PID, Start: *rec.StartTicks}, nil
		}
	}
	inc, readErr := procid.Read(rec.PID)
	state, proof := rec.Check(true)
	if state == procid.Alive && proof != procid.NoProof && readErr == nil {
		return inc.ID, nil
	}
	if errors.Is(readErr, procid.ErrGone) || handleExited != nil && handleExited() {
		return procid.ID{}, fmt.Errorf("authority: acquire pid %d: %w", rec.PID, procid.ErrGone)
	}
	switch {
	case state == procid.Dead && readErr == nil:
		return procid.ID{}, fmt.Errorf("%w over pid %d: %w: now %v, recorded %s",
			ErrNoAuthority, rec.PID, procid.ErrReused, inc.ID, describe(rec))
	case readErr != nil:
		// %v, not %w: the cause may be a permission error, which is not the OS refusing a signal.
		return procid.ID{}, fmt.Errorf("%w over pid %d: cannot read it: %v", ErrNoAuthority, rec.PID, readErr)
	case rec.CreateTime == nil:
		return procid.ID{}, fmt.Errorf("%w over pid %d: record has no exact start under a recorded boot id and a null create time",
			ErrNoAuthority, rec.PID)
	}
	return procid.ID{}, fmt.Errorf("%w over pid %d: identity unproven (%v), recorded %s",
		ErrNoAuthority, rec.PID, state, describe(rec))
}

// describe names what a record remembers of its start, for error messages.
func describe(rec procid.Record) string {
	s := "no start"
	switch {
	case rec.StartTicks != nil:
		s = "start " + strconv.FormatUint(*rec.StartTicks, 10)
	case rec.BootStart != nil:
		s = "boot start " + strconv.FormatFloat(*rec.BootStart, 'f', 2, 64)
	case rec.CreateTime != nil:
		s = "create time " + strconv.FormatFloat(*rec.CreateTime, 'f', 3, 64)
	}
	if rec.BootID != nil {
		s += " (boot " + *rec.BootID + ")"
	}
	return s
}
