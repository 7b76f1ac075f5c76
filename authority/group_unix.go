//go:build unix

package authority

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/custody-dev/custody/internal/backoff"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// valid refuses ids that kill(2) would widen: 0 is the caller's own group, -1 and 1 reach every
// process the caller may signal or init's group, and the caller's own group would include the
// caller and its siblings: a stop never widens onto a parent's or a sibling's scope.
func (g Group) valid() error {
	switch {
	case g.PGID <= 1:
		return fmt.Errorf("%w over group %d: not a process group custody may signal", ErrNoAuthority, g.PGID)
	case g.Leader.PID != 0 && g.Leader.PID != g.PGID:
		return fmt.Errorf("%w over group %d: leader %v is not the group's leader", ErrNoAuthority, g.PGID, g.Leader)
	case g.PGID == unix.Getpgrp():
		return fmt.Errorf("%w over group %d: it is the caller's own process group", ErrNoAuthority, g.PGID)
	}
	return nil
}

func (g Group) verdict() (groupVerdict, error) {
	if err := g.valid(); err != nil {
		return groupUnknown, err
	}
	leader := procid.ID{PID: g.PGID, Start: g.Leader.Start, PidfdID: g.Leader.PidfdID}
	if leader.PidfdID != 0 && procid.PidfsError() == nil {
		return g.verdictByID(leader)
	}
	inc, err := procid.Read(leader.PID)
	switch {
	case err == nil && leader.Start == 0:
		return groupUnknown, fmt.Errorf("%w over group %d: leader %v is alive and its start was not recorded",
			ErrNoAuthority, g.PGID, inc.ID)
	case err == nil && inc.Start != leader.Start:
		return groupForeign, fmt.Errorf("%w over group %d: %w: leader pid now names %v, recorded %v",
			ErrNoAuthority, g.PGID, procid.ErrReused, inc.ID, leader)
	case err == nil:
		return groupHeld, nil
	case errors.Is(err, procid.ErrGone):
		return g.leaderGone()
	}
	// %v, not %w: a permission error reading the leader is not the OS refusing a signal.
	return groupUnknown, fmt.Errorf("%w over group %d: cannot read leader: %v", ErrNoAuthority, g.PGID, err)
}

// verdictByID decides by the leader's pidfs id, which tells apart a stranger that took the
// leader's PID within the tick the leader started in.
func (g Group) verdictByID(leader procid.ID) (groupVerdict, error) {
	switch err := leader.Verify(); {
	case err == nil:
		return groupHeld, nil
	case errors.Is(err, procid.ErrReused):
		return groupForeign, fmt.Errorf("%w over group %d: leader: %w", ErrNoAuthority, g.PGID, err)
	case errors.Is(err, procid.ErrGone):
		return g.leaderGone()
	default:
		return groupUnknown, fmt.Errorf("%w over group %d: cannot read leader: %v", ErrNoAuthority, g.PGID, err)
	}
}

// leaderGone decides a group whose leader is gone: the group id cannot have been recycled while
// members hold it.
func (g Group) leaderGone() (groupVerdict, error) {
	empty, err := g.empty()
	switch {
	case err != nil:
		return groupUnknown, fmt.Errorf("%w over group %d: %v", ErrNoAuthority, g.PGID, err)
	case empty:
		return groupGone, fmt.Errorf("authority: group %d: leader gone and no members left: %w", g.PGID, procid.ErrGone)
	}
	return groupHeld, nil
}

func (g Group) signal(sig os.Signal) error {
	s, err := unixSignal(sig)
	if err != nil {
		return err
	}
	if v, err := g.verdict(); v != groupHeld {
		return err
	}
	// EPERM satisfies errors.Is(err, os.ErrPermission).
	if err := procid.SyscallError("kill", unix.Kill(-g.PGID, s)); err != nil {
		return fmt.Errorf("authority: signal group %d: %w", g.PGID, err)
	}
	return nil
}

func (g Group) empty() (bool, error) {
	if g.PGID <= 1 {
		return false, fmt.Errorf("authority: group %d: not a process group id", g.PGID)
	}
	switch err := unix.Kill(-g.PGID, 0); err {
	case nil:
		// Members exist, but kill(2) counts zombies: a scan may prove they all have exited. A scan
		// that cannot see every process (hidepid, an unreadable one) proves nothing either way,
		// and says why rather than answering "not empty" for a group that may be all zombies.
		live, err := procid.GroupHasLive(g.PGID)
		if errors.Is(err, errors.ErrUnsupported) { // macOS: no scan, and zombies count
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("authority: group %d: members remain, and whether any is alive cannot be told: %w", g.PGID, err)
		}
		return !live, nil
	case unix.EPERM: // members exist, owned by someone the caller may not signal
		return false, nil
	case unix.ESRCH:
		return true, nil
	default:
		return false, fmt.Errorf("authority: group %d: %w", g.PGID, os.NewSyscallError("kill", err))
	}
}

// wait polls empty. A group whose emptiness cannot be told (see empty) is polled on, as one
// that is not empty: its members may still exit. If ctx ends first, the error says why emptiness
// could not be told, when that was the last answer.
func (g Group) wait(ctx context.Context) error {
	var untold error
	empty, err := backoff.Until(ctx, func() (bool, error) {
		empty, err := g.empty()
		if untold = err; errors.Is(err, procid.ErrScanBlind) || errors.Is(err, procid.ErrScanUnreadable) {
			return false, nil
		}
		return empty, err
	})
	switch {
	case err != nil || empty:
		return err
	case untold != nil:
		return fmt.Errorf("authority: wait group %d: %w (%w)", g.PGID, context.Cause(ctx), untold)
	}
	return fmt.Errorf("authority: wait group %d: %w", g.PGID, context.Cause(ctx))
}
