package authority

import (
	"context"
	"os"
	"syscall"

	"github.com/custody-dev/custody/procid"
)

// Group is a process group and the identity of its leader, the process whose PID is the group's
// id. A zero Leader.Start means the leader's start was not recorded; a zero Leader.PID is taken
// as PGID. A non-zero Leader.PidfdID (Linux 6.9+) decides the leader's identity over its start.
//
// A group's identity holds while its leader is the recorded incarnation, or, with the leader
// gone (exited, zombie or reaped), while the group still has members: Linux does not recycle a
// PID that is still some group's id, so the members are the recorded group's. A group whose
// leader's PID now names another incarnation does not hold.
//
// No OS offers a handle on a process group, so two windows remain. One between [Group.Signal]'s
// check and kill(-pgid), like checked mode's (see [Process.Pinned]). And one the rule itself
// cannot see: after the recorded group emptied, its id could be taken by a stranger that reused
// the PID, made a group, and exited leaving members; it needs a full wrap of the PID space.
//
// Process groups are Unix: on Windows every method returns an error wrapping
// [errors.ErrUnsupported] (a Windows scope is a job object).
type Group struct {
	PGID   int
	Leader procid.ID
}

// Holds reports whether the group's identity holds now (see [Group]). It returns false and a nil
// error when the identity provably does not hold (the group is empty and its leader gone, or the
// leader's PID names another incarnation), and an error when it cannot be decided: the leader
// cannot be read, or it is alive and its start was not recorded.
func (g Group) Holds() (bool, error) {
	switch v, err := g.verdict(); v {
	case groupHeld:
		return true, nil
	case groupGone, groupForeign:
		return false, nil
	default:
		return false, err
	}
}

// Signal sends sig to every member of the group, re-checking [Group.Holds] immediately before
// kill(-pgid). It returns an error wrapping [procid.ErrGone] when the group has no members left
// and its leader is gone (nothing was signalled), one wrapping [ErrNoAuthority] when the identity
// does not hold or cannot be decided (nothing was signalled; a reused leader PID also wraps
// [procid.ErrReused]), and one satisfying errors.Is(err, os.ErrPermission) when the OS refuses.
// It refuses PGIDs ≤ 1 and the caller's own process group with [ErrNoAuthority].
func (g Group) Signal(sig os.Signal) error { return g.signal(sig) }

// Ask sends SIGTERM to the group as [Group.Signal] does, and names it ([AskSIGTERM]): the request
// to exit a stop sends first.
func (g Group) Ask() (string, error) { return AskSIGTERM, g.signal(syscall.SIGTERM) }

// Empty reports whether the group has no live member left: kill(-pgid, 0) fails with ESRCH, or,
// on Linux, a /proc scan finds every member a zombie (exited, not yet reaped: an orphaned zombie
// may wait a while for init, and has exited all the same). On macOS, which has no such scan,
// zombies count as members. With no proof either way it returns an error saying why: a scan that
// cannot see every process (/proc mounted with hidepid, an error wrapping
// [procid.ErrScanBlind]) or an unexpected error. A member that runs is never missed: Empty
// never reports an exit early.
func (g Group) Empty() (bool, error) { return g.empty() }

// Wait polls [Group.Empty], from 1 ms up to every 100 ms, until the group is empty or ctx is
// done; it returns nil only when it saw the group empty. When ctx ends first the error wraps
// context.Cause(ctx).
func (g Group) Wait(ctx context.Context) error { return g.wait(ctx) }

type groupVerdict int

const (
	groupUnknown groupVerdict = iota
	groupHeld                 // the recorded group, with the leader or members alive
	groupGone                 // leader gone and no members left
	groupForeign              // the leader's PID names another incarnation
)
