// Package scope takes a child's scope — what a stop or its owner's death kills as a unit — at
// spawn time, so the child never runs one instruction outside it:
//
//	OS            scope                              taken by                       kind
//	Linux, with   a cgroup v2 of its own, made by    clone3 CLONE_INTO_CGROUP: the   "cgroup"
//	a writable    custody (see Containment)          child is born inside it
//	cgroup2
//	Linux else,   a new process group, led by the    Setpgid in the fork, before    "pgrp"
//	macOS         child (pgid == child's pid)        exec (no window)
//	Windows       a job object custody creates,      CREATE_SUSPENDED, then         "job"
//	              JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE AssignProcessToJobObject,
//	                                                 then resume
//
// Every descendant the child starts is born into its scope. [Prepare] chooses the mechanism, once,
// before cmd.Start, and returns it as a [Prepared] scope; its Attach takes the child right after
// the start (or its Abandon undoes it when the start failed):
//
//	p, err := scope.Prepare(cmd)
//	if err != nil { … }
//	// cover p.Desc() with the supervisor: what of the scope exists before the child (a cgroup)
//	if err := cmd.Start(); err != nil { p.Abandon(); … }
//	s, err := p.Attach() // on error the child was killed; still cmd.Wait for it
//
// A scope is described in plain values by [Desc] (what a ledger row records) and rebuilt from one
// by [Open], with its identity proven, by any process of the same user: custody stop, reap, or
// another owner taking it over.
//
// What each scope guarantees, and where it stops:
//   - Linux cgroup: setsid(2), setpgid(2) and double forks stay inside; only a write to another
//     cgroup's cgroup.procs moves a process out, which needs write access to it and to the common
//     ancestor's: every process of root has it, in a delegated subtree every process of the user,
//     and the service manager moves a process on request (systemd-run --scope). Such a move is
//     not prevented, and a teardown of the scope misses what moved.
//     Teardown is cgroup.kill, which the kernel applies to processes forked during the kill too;
//     "empty" is cgroup.events' populated 0. The cgroup is covered by the owner's supervisor
//     before the child exists. An owner that itself runs in a custody cgroup makes its scopes
//     below its own (nested): the outer teardown reaches them, the inner one only its subtree.
//   - Windows: the job dies with its last handle. Custody's handle is not inheritable and the job
//     has no name, so the owner holds the only one (short of another process duplicating it out
//     of the owner, which needs PROCESS_DUP_HANDLE on the owner; an ownership transfer duplicates
//     it into the receiver with [Scope.ShareJob], and the giver then closes its own): when the owner exits — cleanly,
//     by crash or by TerminateProcess — the kernel closes it and kills every process in the job.
//     A descendant leaves the job only with CREATE_BREAKAWAY_FROM_JOB under a job that allows
//     breakaway, which custody's never does. An owner inside a job nests its jobs in it.
//   - Process group (macOS; Linux without a writable cgroup2 subtree, see [Containment]): it does
//     not die with its owner by itself; the owner-death supervisor covers it. And it does not
//     contain a descendant that calls setsid(2), or setpgid(2) into another group: that process
//     leaves the scope, and a stop does not reach it. A group has no handle of its own, but its
//     leader has one: on Linux 6.9+ a scope pins the leader with a pidfd (the one Go took at
//     spawn, or one opened and proven against the recorded incarnation) and signals the group
//     through it, which leaves no window for a recycled number; elsewhere the group's identity
//     is checked immediately before each kill(-pgid) (see [Scope.Signal]).
//
// A process group is one type, whoever holds it: an owner's [Attach], custody stop and reap
// ([Open] of a row), custody run's job control ([Scope.SignalGroup]) and the owner-death
// supervisor ([BindGroup]) prove it, signal it and see it empty by the same rules.
//
// A [Scope] signals only its own cgroup, group or job, never the caller's (invariant: proof
// scope equals mutation scope).
package scope

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/custody-dev/custody/internal/backoff"
	"github.com/custody-dev/custody/internal/scopedesc"
	"github.com/custody-dev/custody/procid"
)

// Kind names the mechanism of a scope; ledger rows record it in their "scope" field. Its words,
// and [Kind.Containment]'s, are in package scopedesc, where the ledger reads them too.
type Kind = scopedesc.Kind

const (
	KindGroup  = scopedesc.KindGroup  // a Unix process group led by the child
	KindCgroup = scopedesc.KindCgroup // a Linux cgroup v2 custody made for the child
	KindJob    = scopedesc.KindJob    // a Windows job object custody created
)

var (
	// ErrNotPrepared is returned by [Prepared.Attach] for a command whose preparation was undone
	// before its start (its SysProcAttr replaced): its child runs outside any scope custody could
	// take without a window, so Attach kills it.
	ErrNotPrepared = errors.New("scope: command was started without scope.Prepare")
	// errStarted refuses to prepare a command too late.
	errStarted = errors.New("already started")
)

// Scope is the scope of one child started with [Prepare] and [Prepared.Attach], rebuilt from a ledger row
// with [Open] or [FromGroup], or bound by a supervisor with [BindGroup] or [OpenCgroup]. Its
// methods are safe for concurrent use.
type Scope struct {
	leader procid.ID
	sys    sysScope // per-OS: the process group, or the job handle
}

// Prepared is a child's scope made before the child starts, in the mechanism [Prepare] chose for
// it: a cgroup the child will be born into, a process group it will make at its fork, or a job
// it will be assigned to while suspended. Once cmd.Start was tried, call [Prepared.Attach] after a
// start that succeeded, or [Prepared.Abandon] after one that failed; exactly one, once: a
// prepared cgroup holds a descriptor and a directory until then. The caller never needs to ask
// which mechanism it holds: [Prepared.Desc] is what to cover before the start.
type Prepared struct {
	cmd   *exec.Cmd
	way   preparation
	used  bool // Attach or Abandon was called
	gated bool // the child cannot leave its group before Attach (see Gated)
}

// preparation is the verbs of one mechanism's preparation, chosen once by prepare: what exists of
// the scope before the child, how the started child is taken into it, and how it is undone.
type preparation interface {
	desc() Desc
	attach(cmd *exec.Cmd, born procid.Span, gated bool) (*Scope, error)
	abandon()
}

// Prepare arranges for cmd's child to start in a new scope of its own, and returns it. Call it
// before cmd.Start; it refuses a command already started, or prepared already. It keeps
// cmd.SysProcAttr's other settings.
//
// Unix: sets Setpgid (unless Setsid is set: setsid(2) makes the child lead a new group too, and a
// setpgid(2) after it would fail); it refuses a nonzero Pgid, which would join an existing group.
// Linux with a cgroup: makes the child's cgroup and sets UseCgroupFD.
// Windows: adds CREATE_SUSPENDED and CREATE_NEW_PROCESS_GROUP to CreationFlags. The child stays
// suspended until [Prepared.Attach] resumes it, so a prepared command that is started must be
// attached. CREATE_NEW_PROCESS_GROUP keeps the owner's console Ctrl+C from reaching the child
// directly (the child starts with Ctrl+C ignored; CTRL_BREAK_EVENT still reaches its console
// group): the owner decides what stops its children.
func Prepare(cmd *exec.Cmd) (*Prepared, error) { return prepareCmd(cmd, false, nil) }

// PrepareSharedConsole is [Prepare] for an interactive child that the user drives from the
// console, as custody run starts one. On Windows the child stays in the caller's console process
// group, taking Ctrl+C as the caller does (a new group would start it with Ctrl+C ignored, and its
// descendants with it), and is still put in a job of its own. Elsewhere it is Prepare: a Unix
// terminal's ^C reaches the foreground process group, which custody run makes the child's.
func PrepareSharedConsole(cmd *exec.Cmd) (*Prepared, error) { return prepareCmd(cmd, true, nil) }

// PrepareReserved is [Prepare], or [PrepareSharedConsole] when sharedConsole is set, with the
// child's cgroup taken from r rather than made now, when r is not nil and not taken. A
// reservation the child cannot use (this process now gives its children process groups, see
// [EnvContainment]) is left untaken: [Reservation.Taken] says so, and the caller cancels it.
func PrepareReserved(cmd *exec.Cmd, r *Reservation, sharedConsole bool) (*Prepared, error) {
	return prepareCmd(cmd, sharedConsole, r)
}

func prepareCmd(cmd *exec.Cmd, sharedConsole bool, r *Reservation) (*Prepared, error) {
	if cmd.Process != nil {
		return nil, fmt.Errorf("scope: prepare %s: %w", cmd.Path, errStarted)
	}
	way, err := prepare(cmd, sharedConsole, r)
	if err != nil {
		return nil, err
	}
	return &Prepared{cmd: cmd, way: way}, nil
}

// Desc describes what of the scope exists before the child: for a cgroup its path and id
// (Kind [KindCgroup]), which the owner's supervisor covers before cmd.Start, so that the child
// is covered from its first instruction. A process group and a job come into being with the
// child: their Desc is the zero Desc, which covers nothing, and [Prepared.Attach]'s scope
// describes them.
func (p *Prepared) Desc() Desc { return p.way.desc() }

// Attach takes custody of the scope of the command's child. Call it right after a successful
// cmd.Start, before anything waits for the child.
//
// Unix: records the group (pgid == the child's pid) and its leader's incarnation; if the child has
// already exited, its start can no longer be read and [Scope.Leader] has Start 0. Windows: creates
// the job, assigns the suspended child to it through its process handle, then resumes it.
//
// When Attach fails, it has killed the child (on Unix its whole group, when the group was made),
// and removed its cgroup, so no unowned child is left; the caller still waits for cmd to reap it.
func (p *Prepared) Attach() (*Scope, error) { return p.AttachWithin(procid.Span{}) }

// AttachWithin is [Prepared.Attach] for a child that cmd.Start forked within born (see
// [procid.Span]). In a cgroup, where born tells the child's start, the child is not read from
// /proc: its PID and its start are known, and its pidfs id comes from the pidfd Go took at spawn.
// In a process group the child is read as Attach reads it, to check that it still leads its group,
// unless it is gated (see [Prepared.Gated]).
func (p *Prepared) AttachWithin(born procid.Span) (*Scope, error) {
	cmd := p.cmd
	switch {
	case cmd.Process == nil:
		return nil, fmt.Errorf("scope: attach %s: not started", cmd.Path)
	case p.used:
		return nil, fmt.Errorf("scope: attach pid %d: attached or abandoned already", cmd.Process.Pid)
	}
	p.used = true
	s, err := p.way.attach(cmd, born, p.gated)
	if err != nil {
		p.way.abandon()
		abort(cmd)
		return nil, err
	}
	return s, nil
}

// Gated tells p that its child cannot leave its process group before [Prepared.AttachWithin]: it
// starts held at a gate that runs nothing of the program and that the caller opens only after
// Attach (custody's gate, see custody.Init). The kernel put the child in its group during the fork,
// before the exec that Start waited for, so the group is proven without a look: AttachWithin then
// takes the child's start from born, as in a cgroup, instead of reading /proc (15-30 µs of the
// start) to check that the child still leads its group. Call it before cmd.Start.
func (p *Prepared) Gated() {
	if p != nil {
		p.gated = true
	}
}

// Abandon releases what [Prepare] took when cmd.Start failed: it removes the cgroup made for the
// child that never started. It does nothing after Attach, a second time, or for a nil Prepared.
func (p *Prepared) Abandon() {
	if p != nil && !p.used {
		p.used = true
		p.way.abandon()
	}
}

// FromGroup rebuilds the scope of a process group recorded in a ledger row (its pgid and its
// leader's incarnation), for a stop by another process than the one that spawned it. A zero
// leader.PID is taken as pgid; leader.Start 0 means the start was not recorded, which makes
// [Scope.Signal] refuse while the leader's PID names a live process.
//
// Linux: when the leader is alive and proves to be the recorded incarnation (by its pidfs id
// where the row has one and the kernel gives them, else by its start), the scope pins it with a
// pidfd, and every signal goes through it (see [Scope.Pinned]). Otherwise, and on macOS, the
// group's identity is checked again before each signal (see [Scope.Signal]).
//
// On Windows it returns an error wrapping [errors.ErrUnsupported]: a job object can be opened
// from another process only by name, and custody's jobs have none, so that nothing but the owner
// can hold one open (and keep its processes alive past the owner's death).
func FromGroup(pgid int, leader procid.ID) (*Scope, error) { return fromGroup(pgid, leader) }

// BindGroup binds the process group pgid as it is now, for an owner-death supervisor that its
// owner has just told of it (a register line): the supervisor trusts its owner, and binds what
// it finds. A leader alive now is bound, with its start, even one not yet in its group (the
// owner may speak before the child's setpgid(2) runs, and a process alive now cannot share a
// PID with an older group), and on Linux it is pinned with a pidfd; a leader given with a start
// (leader.Start) or a pidfs id (leader.PidfdID) must still be that incarnation, or the error
// wraps authority.ErrNoAuthority and procid.ErrReused. Without a live leader the group is bound
// as given when it has members; with none it is already gone: the error wraps procid.ErrGone
// (binding it would let a later group with the same id, a stranger's, match). leader.PID is
// ignored. Like every process-group scope it refuses pgid ≤ 1 and the caller's own group.
// On Windows: an error wrapping [errors.ErrUnsupported].
func BindGroup(pgid int, leader procid.ID) (*Scope, error) { return bindGroup(pgid, leader) }

// Kind reports the mechanism: [KindCgroup] or [KindGroup] on Linux, [KindGroup] on macOS,
// [KindJob] on Windows.
func (s *Scope) Kind() Kind { return s.kind() }

// PGID returns the process group's id on Unix, and 0 on Windows.
func (s *Scope) PGID() int { return s.pgid() }

// Leader returns the incarnation of the child the scope was taken for (on Unix, the group's
// leader). Start is 0 when it was not known (see [Attach] and [FromGroup]).
func (s *Scope) Leader() procid.ID { return s.leader }

// Signal sends sig to every process in the scope. Success means the signal was accepted, never
// that anything exited: [Scope.Wait] observes that. It returns an error wrapping
// [procid.ErrGone] when nothing is left in the scope (nothing was signalled), one satisfying
// errors.Is(err, os.ErrPermission) when the OS refuses, and one wrapping os.ErrClosed after
// [Scope.Close].
//
// Unix, a process group: its identity is the leader's (see [FromGroup]). A scope that pins the
// leader with a pidfd (Linux 6.9+: [Scope.Pinned]) signals through it with
// PIDFD_SIGNAL_PROCESS_GROUP: the kernel finds the group from the leader's own struct pid, so
// the signal reaches the recorded group, even after the leader exited, and nothing else, whatever
// became of the number; no check is needed and there is no window. Otherwise (macOS, older
// kernels, a leader that was gone when the scope was opened) kill(-pgid) follows a fresh check
// that the group's identity holds: the leader is the recorded incarnation, or, with the leader
// gone, the group still has members (the kernel does not hand out a PID that is still some
// group's id). When it does not hold, Signal refuses (wrapping authority.ErrNoAuthority, and
// procid.ErrReused for a recycled leader PID). The checked path leaves two windows: the
// microseconds between the check and the kill, and, once the recorded group emptied, a stranger
// that reused its id and made a group of the same number, which needs a full wrap of the PID
// space. A group whose only members left are zombies has exited: nothing is signalled. Signal
// refuses pgid ≤ 1 and the caller's own group whatever the proof.
//
// Linux, a cgroup: every process in it, listed from cgroup.procs (SIGKILL: cgroup.kill).
//
// Windows: [os.Kill] terminates every process in the job (TerminateJobObject, exit code 1);
// other signals return an error wrapping [errors.ErrUnsupported].
func (s *Scope) Signal(sig os.Signal) error { return s.signal(sig) }

// SignalAll sends sig to every scope in ss, as [Scope.Signal] to each, and returns each one's
// error (nil, or as Signal's), in the order of ss. On Linux, the cgroup scopes of one directory
// (one owner's, as a supervisor sweeping them has) are asked once together, not each, whether
// cgroups lie below them.
func SignalAll(ss []*Scope, sig os.Signal) []error { return signalAll(ss, sig) }

// SignalGroup sends sig to the process group the scope's child leads, proven as [Scope.Signal]
// proves a process-group scope: the job a terminal stops and continues. On the process-group
// path it is the scope itself; in a cgroup, the part of it that stayed in the child's group. It
// returns an error wrapping [errors.ErrUnsupported] on Windows, and for a scope that records no
// group (one a supervisor bound by its cgroup).
func (s *Scope) SignalGroup(sig os.Signal) error { return s.signalGroup(sig) }

// GroupSignalError returns nil when a process group can be signalled through a pidfd on its
// leader (PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9+), which leaves no window for a recycled group
// id, and otherwise why not: the kernel lacks the flag (an error wrapping
// [errors.ErrUnsupported]), pidfds are unavailable, or the OS has no process descriptors. Groups
// are then checked before each kill(-pgid) (see [Scope.Signal]). The probe runs once per
// process; custody doctor shows it.
func GroupSignalError() error { return groupSignalError() }

// Pinned reports whether [Scope.Signal] goes through a handle that can never come to name
// another scope: a cgroup's directory, a job object, or a pidfd on a process group's leader
// (Linux 6.9+). It is false where each signal is preceded by a fresh check of the group's
// identity instead (see Signal).
func (s *Scope) Pinned() bool { return s.pinned() }

// Ask asks every process in the scope to exit, the way its OS lets a program ask, and names the
// request it sent: a stop's first step, before the grace and the kill. Success means the request
// was delivered, never that anything exited. Errors are [Scope.Signal]'s, and one wrapping
// [errors.ErrUnsupported] when no request can reach the scope (nothing was sent).
//
// Unix: SIGTERM to the process group ([authority.AskSIGTERM]). Windows, which has no SIGTERM:
// CTRL_BREAK_EVENT to the console process group the child leads ([authority.AskCtrlBreak]), when
// [Prepare] made one and the child runs on the caller's console; and WM_CLOSE, what a window's
// close button sends, to the top-level windows of every process in the job
// ([authority.AskWMClose]); "CTRL_BREAK_EVENT+WM_CLOSE" when both went out. A console program
// started by [PrepareSharedConsole], or by an owner without a console, and without a window, can
// only be killed.
func (s *Scope) Ask() (string, error) { return s.ask() }

// Empty reports whether no live process is left in the scope; it never reports an exit early.
// A process group is empty when no member is left or, on Linux, every member left is a zombie
// (through the leader's pidfd when the scope pins it, else by number; with members left, Linux
// scans /proc for a live one, and returns an error saying why when the scan cannot see every
// process: /proc mounted with hidepid wraps [procid.ErrScanBlind]); on macOS zombies count as
// members. A cgroup holds no zombie: a process leaves it as it exits. On Windows it asks
// the job for its count of active processes.
func (s *Scope) Empty() (bool, error) { return s.empty() }

// Census is one look at which process groups have a live member: on Linux a single /proc scan,
// made at its first question and shared by every later [Scope.EmptyIn] given it. A caller that
// asks many process-group scopes at once (a supervisor polling everything it covers) uses one
// census a round instead of one scan a group; a round in which no group has members scans
// nothing. A census is stale once taken: use a new one for each round of questions. The zero
// Census is ready to use.
type Census struct {
	once sync.Once
	live map[int]bool
	err  error // why the scan proves nothing (macOS has none; hidepid hides processes)
}

// hasLive reports whether the census saw a live member of pgid, taking it if not yet taken; on
// error it reports true, as procid.GroupHasLive does.
func (c *Census) hasLive(pgid int) (bool, error) {
	c.once.Do(func() { c.live, c.err = procid.LiveGroups() })
	return c.err != nil || c.live[pgid], c.err
}

// EmptyIn is [Scope.Empty] with a process group's live members looked up in c, not by a scan of
// its own; whether the group has members at all is still asked now (through the leader's pidfd,
// or by number). For other scopes it is Empty.
func (s *Scope) EmptyIn(c *Census) (bool, error) { return s.emptyIn(c) }

// Wait polls [Scope.Empty], from every 1 ms up to every 100 ms, until the scope is empty or ctx
// is done, and returns nil only when it saw the scope empty. When ctx ends first the error wraps
// context.Cause(ctx), and, when the last poll could not tell emptiness, why. On macOS the
// leader's zombie keeps the group non-empty, so something must reap the child (cmd.Wait) for
// Wait to return.
//
// A cgroup scope needs no polling: Wait sleeps on cgroup.events, which the kernel wakes when the
// cgroup empties, and a zombie is not a member (a process leaves its cgroup as it exits). A cgroup
// removed before or while Wait runs is empty (only an empty one can be removed): Wait returns nil.
func (s *Scope) Wait(ctx context.Context) error { return s.wait(ctx) }

// pollEmpty is Wait for scopes that offer no event for "empty".
func (s *Scope) pollEmpty(ctx context.Context) error {
	if empty, err := backoff.Until(ctx, s.Empty); err != nil || empty {
		return err
	}
	return fmt.Errorf("scope: wait %v: %w", s, context.Cause(ctx))
}

// Close releases the scope. For a cgroup it kills what is left (cgroup.kill), waits up to a
// second for the cgroup to empty, and removes it (with any empty nested owner's cgroups below
// it); it fails when the cgroup could not be removed. On Windows it closes custody's handle to the job, the only one, and
// so kills every process still in it (KILL_ON_JOB_CLOSE); afterwards Signal, Empty and Wait
// return errors wrapping os.ErrClosed. A Scope dropped without Close keeps its job until the
// owner exits, when the processes die with it. For a process group Close kills nothing (stop
// the group with Signal and Wait first): it closes the pidfd that pins the leader, if any, and
// the group is checked before each signal from then on. Close is idempotent.
func (s *Scope) Close() error { return s.close() }

// Release lets go of the scope without touching its processes: for a cgroup it closes the
// descriptor custody holds; for a process group, the pidfd on its leader (as Close). On Windows it closes custody's
// handle to the job, which kills the job's processes if it was the last handle (see Close).
// Signal, Empty and Wait fail on a released cgroup or job. Release is idempotent.
func (s *Scope) Release() error { return s.release() }

// Desc describes the scope in plain values: what a ledger row records, and what [Open] takes.
func (s *Scope) Desc() Desc { return s.desc() }

// String names the scope for messages: "cgroup /custody/custody-4026531836-41-96/s1", "pgrp 4242", or
// "job of pid 4242".
func (s *Scope) String() string { return s.describe() }

// Desc describes a scope in plain values, as a ledger row records it, so that a process other
// than the one that made it can rebuild it with [Open], and another owner's supervisor cover it.
// It is one type with its JSON wherever a scope is described (a ledger row, a transfer's offer):
// see package scopedesc for its fields.
type Desc = scopedesc.Desc

// Open rebuilds a scope from its description, for a stop or a reap by another process than the
// one that made it, and proves it is the described one before any signal:
//   - KindGroup: as [FromGroup].
//   - KindCgroup (Linux): the path must name a scope custody made (a directory s<N> inside an
//     owner's directory custody-<ns>-<pid>-<start>) and the cgroup there must have the recorded id;
//     otherwise the error wraps authority.ErrNoAuthority (and procid.ErrReused for another id).
//     A cgroup that no longer exists was removed, which needs it empty: the error wraps
//     procid.ErrGone. The open cgroup is held until [Scope.Close].
//   - A process group pinned with a pidfd (see FromGroup) holds it until [Scope.Close] or
//     [Scope.Release].
//   - KindJob: unsupported (see [FromGroup]).
func Open(d Desc) (*Scope, error) { return open(d) }

// EnvContainment names the environment variable that, set to "process-group", keeps an owner
// from making cgroups: its children get process groups, as where no cgroup is writable. It is
// read at each start, and inherited by nested owners unless their environment drops it.
const EnvContainment = "CUSTODY_CONTAINMENT"

// Containment reports which kind of scope this process's children get, and, for a cgroup,
// where custody makes them: the directory that holds each owner's custody-<ns>-<pid>-<start>
// directory of scopes. When it is not a cgroup, why says why: no
// cgroup2 hierarchy, the caller's cgroup is not writable (an ordinary user outside a delegated
// subtree), the kernel lacks cgroup.kill (5.14) or clone3 (5.7), or the OS has none. On Linux the
// answer is proven by making the directory (and removing it again if no scope uses it yet).
func Containment() (kind Kind, where string, why error) { return containment() }

// OpenCgroup binds the cgroup scope at path (a hierarchy path, as [Desc.Cgroup]) as it is now, with no recorded
// id to prove it against: it is for a supervisor, which is given the path by its owner right
// after the owner made the cgroup (before its child exists) and holds it open from then on. Use
// [Open] for a cgroup named by a row. The path must name a scope custody made (see [Open]). It
// also holds open the interface files a sweep reads (cgroup.procs, cgroup.stat, cgroup.events;
// up to a quarter of RLIMIT_NOFILE over all scopes, beyond which each read opens its file), so
// that the sweep at the owner's death opens none. Not on Linux: an error wrapping
// [errors.ErrUnsupported].
func OpenCgroup(path string) (*Scope, error) { return openCgroupPath(path) }

// Leftover is a directory of cgroup scopes whose owner is dead (and whose supervisor, which
// removes it, died too or was killed with it).
type Leftover struct {
	Cgroup    string    // the owner's directory, a hierarchy path
	Owner     procid.ID // the dead owner, from the directory's name
	Populated bool      // some process still lives in one of its scopes
}

// Leftovers lists the cgroup directories of dead owners in the place this process's owners make
// theirs (see [Containment]). An owner is dead when its PID is gone or names another start; an
// owner that cannot be read is not listed. Without cgroups the list is empty.
func Leftovers() ([]Leftover, error) { return leftovers() }

// RemoveLeftover removes a leftover's empty cgroups, deepest first. It kills nothing: a populated
// scope stays (and the call fails), for its processes are stopped through their ledger rows.
func RemoveLeftover(l Leftover) error { return removeLeftover(l) }

// RemoveDeadOwner removes what is left of the owner directory that holds the cgroup scope rel (a
// hierarchy path, as a supervisor covers it), if that directory's owner is provably dead (see
// [Leftovers]): its empty cgroups, deepest first, and the directory. It kills nothing: a
// populated cgroup stays, and the call fails. While the owner lives, or cannot be read, it does
// nothing, but for an owner still exiting: it waits until ctx is done for that exit to complete
// (an expired ctx looks once). A supervisor calls it once it has swept its owner's scopes: what
// the owner made and had not covered yet when it died (the next start's spare cgroup, made in the
// background) is known to no one else, and would wait for a reap.
func RemoveDeadOwner(ctx context.Context, rel string) error { return removeDeadOwner(ctx, rel) }

// RemoveDeadOwnerDir is [RemoveDeadOwner] for the owner directory dir itself (as [OwnerDir]
// names it), which may hold no scope yet: an owner makes it before its first child's cgroup, and
// one killed in between leaves it empty, with nothing covered that would lead its supervisor there.
func RemoveDeadOwnerDir(ctx context.Context, dir string) error { return removeDeadOwnerDir(ctx, dir) }

// OwnerDir returns the hierarchy path of the directory this process's cgroup scopes go in
// (custody-<ns>-<pid>-<start>, see [Containment]), whether it exists now or not, or "" when its
// children get no cgroups. An owner names it to its supervisor, which outlives it and removes it.
func OwnerDir() string { return ownerDir() }

// ReleaseOwnerDir removes this process's directory of cgroup scopes when no scope it made is
// left (the next cgroup scope makes it again), and does nothing otherwise, or where there are no
// cgroups. An owner whose supervisor is released as idle calls it: from then until its next
// start no supervisor would remove the directory at the owner's death, and only a reap would.
func ReleaseOwnerDir() { releaseOwnerDir() }

// WaitAll waits until every scope in ss is empty or ctx is done, and returns the scopes it did
// not see empty: those still populated when ctx ended, and those whose emptiness could not be
// told (each is asked once, and not waited on). It is [Scope.Wait] for many scopes at once, as a
// supervisor sweeping its owner's scopes needs.
//
// Linux: cgroup scopes opened with [OpenCgroup] are waited on together, in one epoll(7) on their
// cgroup.events files, which the kernel wakes when "populated" changes; each is read once when it
// says so, rather than every scope once a poll. Other scopes are polled with [Scope.Empty], from
// every 1 ms up to every 10 ms.
func WaitAll(ctx context.Context, ss []*Scope) []*Scope { return waitAll(ctx, ss) }
