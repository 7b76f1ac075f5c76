//go:build unix

package scope

// A process group as a scope: the one implementation that custody stop and reap, an owner's
// children, custody run's job control and the owner-death supervisor all signal through.
//
// A group's identity holds while its leader is the recorded incarnation, or, with the leader
// gone (exited, zombie or reaped), while the group still has members: the kernel does not hand
// out a PID that is still some group's id, so the members are the recorded group's. A group
// whose leader's PID now names another incarnation does not hold. A zero leader start means it
// was not recorded: while a process holds the PID nothing proves it is the leader, and the group
// is refused. A non-zero pidfs id (Linux 6.9+) decides the leader's identity over its start.
//
// The proof at signal time is the strongest the OS offers:
//
//	pinned     a pidfd on the leader, proven when it was taken (leaderfd_linux.go): signals go
//	           through it with PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9), and the kernel resolves
//	           the group from the leader's own struct pid, so they reach the recorded group and
//	           nothing else, whatever became of the number; no check, and no window
//	checked    elsewhere (macOS, older kernels, a leader that was gone when the group was
//	           opened): the rule above is checked immediately before kill(-pgid), which leaves
//	           a window of microseconds, like authority's checked mode; and one the rule cannot
//	           see: after the recorded group emptied, its id could be taken by a stranger that
//	           reused the PID, made a group and exited leaving members, which needs a full wrap
//	           of the PID space

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/backoff"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// group is a process group and what proves it: its leader's incarnation (PID == pgid), and a
// pidfd on the leader when one was proven.
type group struct {
	pgid   int
	leader procid.ID

	mu sync.RWMutex // read-held while fd is in use: a closed descriptor's number is reissued
	fd int          // a pidfd naming the leader, or -1
}

type verdict int

const (
	groupUnknown verdict = iota
	groupHeld            // the recorded group, with the leader or members alive
	groupGone            // leader gone and no members left
	groupForeign         // the leader's PID names another incarnation
)

// checkedGroup is a group signalled by the rule alone, with no pidfd.
func checkedGroup(leader procid.ID) *group { return &group{pgid: leader.PID, leader: leader, fd: -1} }

// pinnedGroup is the group a recorded leader leads, pinned by a pidfd when the leader is alive
// and proves to be the recorded incarnation (see pinLeader); otherwise it is checked at each
// signal, which then refuses a leader that is not the recorded one.
func pinnedGroup(leader procid.ID) *group {
	g := checkedGroup(leader)
	g.fd = pinLeader(leader)
	return g
}

// valid refuses ids that kill(2) would widen: 0 is the caller's own group, -1 and 1 reach every
// process the caller may signal or init's group, and the caller's own group would include the
// caller and its siblings: a stop never widens onto a parent's or a sibling's scope.
func (g *group) valid() error {
	switch {
	case g.pgid <= 1:
		return fmt.Errorf("%w over group %d: not a process group custody may signal", authority.ErrNoAuthority, g.pgid)
	case g.leader.PID != g.pgid:
		return fmt.Errorf("%w over group %d: leader %v is not the group's leader", authority.ErrNoAuthority, g.pgid, g.leader)
	case g.pgid == unix.Getpgrp():
		return fmt.Errorf("%w over group %d: it is the caller's own process group", authority.ErrNoAuthority, g.pgid)
	}
	return nil
}

// signal sends sig to every member: through the leader's pidfd when one is held and the kernel
// can, else after checking the rule. Errors are [Scope.Signal]'s.
func (g *group) signal(sig unix.Signal) error {
	if err := g.valid(); err != nil {
		return err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if done, err := g.signalPinned(sig); done {
		return err
	}
	if v, err := g.verdict(); v != groupHeld {
		return err
	}
	// EPERM satisfies errors.Is(err, os.ErrPermission).
	if err := procid.SyscallError("kill", unix.Kill(-g.pgid, sig)); err != nil {
		return fmt.Errorf("scope: signal group %d: %w", g.pgid, err)
	}
	return nil
}

// signalPinned signals through the pidfd; done is false when there is none to go through, or
// this kernel cannot. A leader that exited leaves its group's other members; when none is left
// alive (zombies have exited) the group is gone and nothing is sent, as the checked path does.
func (g *group) signalPinned(sig unix.Signal) (done bool, err error) {
	if g.fd < 0 || !groupSignalWorks() {
		return false, nil
	}
	if leaderExited(g.fd) {
		if empty, err := g.emptyLocked(); err == nil && empty {
			return true, g.goneErr()
		}
	}
	switch err := signalByLeader(g.fd, sig); {
	case errors.Is(err, errors.ErrUnsupported):
		return false, nil
	case err == unix.ESRCH:
		return true, g.goneErr()
	case err != nil:
		return true, fmt.Errorf("scope: signal group %d through its leader: %w", g.pgid, procid.SyscallError("pidfd_send_signal", err))
	}
	return true, nil
}

func (g *group) goneErr() error {
	return fmt.Errorf("scope: group %d: leader gone and no members left: %w", g.pgid, procid.ErrGone)
}

// verdict checks the rule (see the file comment) now.
func (g *group) verdict() (verdict, error) {
	leader := g.leader
	if leader.PidfdID != 0 && procid.PidfsError() == nil {
		return g.verdictByID(leader)
	}
	inc, err := procid.Read(leader.PID)
	switch {
	case err == nil && leader.Start == 0:
		return groupUnknown, fmt.Errorf("%w over group %d: leader %v is alive and its start was not recorded",
			authority.ErrNoAuthority, g.pgid, inc.ID)
	case err == nil && inc.Start != leader.Start:
		return groupForeign, fmt.Errorf("%w over group %d: %w: leader pid now names %v, recorded %v",
			authority.ErrNoAuthority, g.pgid, procid.ErrReused, inc.ID, leader)
	case err == nil:
		return groupHeld, nil
	case errors.Is(err, procid.ErrGone):
		return g.leaderGone()
	}
	// %v, not %w: a permission error reading the leader is not the OS refusing a signal.
	return groupUnknown, fmt.Errorf("%w over group %d: cannot read leader: %v", authority.ErrNoAuthority, g.pgid, err)
}

// verdictByID decides by the leader's pidfs id, which tells apart a stranger that took the
// leader's PID within the tick the leader started in.
func (g *group) verdictByID(leader procid.ID) (verdict, error) {
	switch err := leader.Verify(); {
	case err == nil:
		return groupHeld, nil
	case errors.Is(err, procid.ErrReused):
		return groupForeign, fmt.Errorf("%w over group %d: leader: %w", authority.ErrNoAuthority, g.pgid, err)
	case errors.Is(err, procid.ErrGone):
		return g.leaderGone()
	default:
		return groupUnknown, fmt.Errorf("%w over group %d: cannot read leader: %v", authority.ErrNoAuthority, g.pgid, err)
	}
}

// leaderGone decides a group whose leader is gone: the group id cannot have been recycled while
// members hold it.
func (g *group) leaderGone() (verdict, error) {
	empty, err := g.emptyLocked()
	switch {
	case err != nil:
		return groupUnknown, fmt.Errorf("%w over group %d: %v", authority.ErrNoAuthority, g.pgid, err)
	case empty:
		return groupGone, g.goneErr()
	}
	return groupHeld, nil
}

func (g *group) empty() (bool, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.emptyLocked()
}

// emptyLocked reports whether no member is alive, scanning /proc for one when the group has
// members (see emptyBy).
func (g *group) emptyLocked() (bool, error) {
	return g.emptyBy(func() (bool, error) { return procid.GroupHasLive(g.pgid) })
}

// emptyIn is empty with the live members looked up in a census.
func (g *group) emptyIn(c *Census) (bool, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.emptyBy(func() (bool, error) { return c.hasLive(g.pgid) })
}

// emptyBy reports whether no member is alive. A pinned group asks the kernel about the leader's
// own group; a checked one asks by number, which after the group emptied could find a stranger's
// group and answer "not empty", never the reverse. kill(2) counts zombies, so members are then
// looked for by hasLive, a scan of /proc (Linux; on macOS, where it is unsupported, zombies count
// as members).
func (g *group) emptyBy(hasLive func() (bool, error)) (bool, error) {
	if g.pgid <= 1 {
		return false, fmt.Errorf("scope: group %d: not a process group id", g.pgid)
	}
	err := g.probeLocked()
	switch err {
	case nil:
		// Members exist, but kill(2) counts zombies: a scan may prove they all have exited. A scan
		// that cannot see every process (hidepid, an unreadable one) proves nothing either way,
		// and says why rather than answering "not empty" for a group that may be all zombies.
		live, err := hasLive()
		if errors.Is(err, errors.ErrUnsupported) { // macOS: no scan, and zombies count
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("scope: group %d: members remain, and whether any is alive cannot be told: %w", g.pgid, err)
		}
		return !live, nil
	case unix.EPERM: // members exist, owned by someone the caller may not signal
		return false, nil
	case unix.ESRCH:
		return true, nil
	}
	return false, fmt.Errorf("scope: group %d: %w", g.pgid, os.NewSyscallError("kill", err))
}

// probeLocked sends signal 0 to the group: through the leader's pidfd when held, else by number.
func (g *group) probeLocked() error {
	if g.fd >= 0 && groupSignalWorks() {
		if err := signalByLeader(g.fd, 0); !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	return unix.Kill(-g.pgid, 0)
}

// wait polls empty. A group whose emptiness cannot be told (see empty) is polled on, as one
// that is not empty: its members may still exit. If ctx ends first, the error says why emptiness
// could not be told, when that was the last answer.
func (g *group) wait(ctx context.Context) error {
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
		return fmt.Errorf("scope: wait group %d: %w (%w)", g.pgid, context.Cause(ctx), untold)
	}
	return fmt.Errorf("scope: wait group %d: %w", g.pgid, context.Cause(ctx))
}

// pinned reports whether signals go through the leader's pidfd.
func (g *group) pinned() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.fd >= 0 && groupSignalWorks()
}

// close lets go of the pidfd; the group is checked at each signal from then on.
func (g *group) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	closeLeader(g.fd)
	g.fd = -1
}

// boundGroup binds the group pgid as it is now, for a supervisor that its owner has just told of
// it (see [BindGroup]). A leader alive now is bound, even one not yet in its group: the owner may
// have written the line before the child's setpgid(2) ran, and a process alive now cannot have a
// PID shared with an older group. A leader recorded with a start or a pidfs id must still be
// that incarnation. Without a live leader the group is bound as recorded when it has members,
// and is already gone (an error wrapping procid.ErrGone) when it has none: binding it would let
// a later group with the same id, a stranger's, match.
func boundGroup(pgid int, leader procid.ID) (*group, error) {
	g := checkedGroup(procid.ID{PID: pgid, Start: leader.Start, PidfdID: leader.PidfdID})
	if err := g.valid(); err != nil {
		return nil, err
	}
	fd := openLeader(pgid) // before the read: see provenLeader
	inc, err := procid.Read(pgid)
	foreign := err == nil && leader.Start != 0 && inc.Start != leader.Start
	if leader.PidfdID != 0 && err == nil && !foreign {
		// Equal starts do not settle it: a process that took the PID within the tick the
		// leader started in has them too. The pidfs id does.
		if now, ok := leaderID(fd); ok && now != leader.PidfdID {
			foreign = true
		}
	}
	switch {
	case foreign:
		closeLeader(fd)
		return nil, fmt.Errorf("%w over group %d: %w: leader pid names another process", authority.ErrNoAuthority, pgid, procid.ErrReused)
	case err == nil:
		g.leader.Start, g.fd = inc.Start, provenLeader(fd)
		if id, ok := leaderID(g.fd); ok {
			g.leader.PidfdID = id
		}
		return g, nil
	}
	closeLeader(fd)
	switch {
	case errors.Is(err, procid.ErrGone) && unix.Kill(-pgid, 0) == unix.ESRCH:
		return nil, g.goneErr()
	case !errors.Is(err, procid.ErrGone):
		// The leader could not be read: nothing is known of it, and a process found at its PID
		// later is refused (see verdict).
		g.leader.Start = 0
	}
	return g, nil
}
