//go:build unix

package scope

// Unix scopes are process groups. Facts relied on:
//
//	SysProcAttr.Setpgid      setpgid(0, 0) in the forked child before exec, so the child leads
//	                         a new group (pgid == its pid) before it runs any code of its own;
//	                         a failure aborts cmd.Start
//	setsid(2)                a new session is a new group too; setpgid(2) after it fails (EPERM)
//	a group's id             is its leader's pid; the kernel does not hand out a pid that is still
//	                         some group's id, and an unreaped child (a zombie too) pins its pid
//	kill(-pgid, sig)         signals every member; ESRCH when none is left (zombies count
//	                         here, which is why emptiness on Linux also scans /proc)

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

type sysScope struct {
	group *group    // the leader's group; in a cgroup it serves job control only (nil: none)
	m     mechanism // what the scope is: its process group, or its cgroup
}

// mechanism is the verbs of one kind of Unix scope, chosen once when the scope is made: a
// process group (groupScope) or a cgroup (cgroupScope). Scope's methods call them, and never ask
// which kind they hold.
type mechanism interface {
	kind() Kind
	signal(unix.Signal) error
	pinned() bool
	empty() (bool, error)
	emptyIn(*Census) (bool, error)
	wait(context.Context) error
	close() error // Scope.Close: a cgroup is killed and removed, a group only let go of
	release()     // Scope.Release: let go, touching nothing
	describe() string
	fill(*Desc)
}

// cgroup returns the scope's cgroup, or nil for a process group: for the operations that batch
// cgroups (SignalAll, WaitAll).
func (s sysScope) cgroup() *cgroup {
	if m, ok := s.m.(cgroupScope); ok {
		return m.cg
	}
	return nil
}

func (s *Scope) kind() Kind { return s.sys.m.kind() }

func prepare(cmd *exec.Cmd, _ bool, r *Reservation) (preparation, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	a := cmd.SysProcAttr
	if a.Pgid != 0 {
		return nil, fmt.Errorf("scope: prepare %s: SysProcAttr.Pgid %d would join an existing group", cmd.Path, a.Pgid)
	}
	if !a.Setsid {
		a.Setpgid = true
	}
	cg, err := prepareCgroup(cmd, r)
	if cg == nil || err != nil {
		return groupPrep{}, err
	}
	return cgroupPrep{cg}, nil
}

// prepared reports whether cmd's child was made to lead a new group.
func prepared(cmd *exec.Cmd) bool {
	a := cmd.SysProcAttr
	return a != nil && a.Pgid == 0 && (a.Setpgid || a.Setsid)
}

// groupPrep prepares a process-group scope: nothing of it exists before the child, which makes
// the group at its fork.
type groupPrep struct{}

func (groupPrep) desc() Desc { return Desc{} }
func (groupPrep) abandon()   {}

func (groupPrep) attach(cmd *exec.Cmd, born procid.Span, gated bool) (*Scope, error) {
	if !prepared(cmd) {
		return nil, fmt.Errorf("scope: attach pid %d: %w", cmd.Process.Pid, ErrNotPrepared)
	}
	return attachGroup(cmd, !gated, born)
}

// cgroupPrep prepares a cgroup scope: the cgroup exists before the child, which clone3 starts
// inside it.
type cgroupPrep struct{ cg *cgroup }

func (p cgroupPrep) desc() Desc { return Desc{Kind: KindCgroup, Cgroup: p.cg.rel, CgroupID: p.cg.id} }

// abandon removes the cgroup: nothing should be there, but a child whose start failed late may be.
func (p cgroupPrep) abandon() { p.cg.teardown() }

func (p cgroupPrep) attach(cmd *exec.Cmd, born procid.Span, _ bool) (*Scope, error) {
	if !prepared(cmd) {
		return nil, fmt.Errorf("scope: attach pid %d: %w", cmd.Process.Pid, ErrNotPrepared)
	}
	s, err := attachGroup(cmd, false, born)
	if err != nil {
		return nil, err
	}
	s.sys.m = cgroupScope{p.cg}
	return s, nil
}

// attachGroup records the child's group. strict refuses a child that already left it, when the
// group is the scope and the child could have; otherwise (in a cgroup, where the group only serves
// job control and the child may leave it, or a gated child, which cannot have left it yet) its
// start is taken from born when born tells it.
func attachGroup(cmd *exec.Cmd, strict bool, born procid.Span) (*Scope, error) {
	pid := cmd.Process.Pid
	leader := procid.ID{PID: pid}
	if start, ok := born.Start(); ok && !strict {
		// Known without a read of /proc: the kernel set it during the fork born brackets.
		leader.Start = start
		return leaderScope(cmd, leader), nil
	}
	// ReadChild reads a zombie too: a child that already exited is unreaped until the caller
	// waits for it, so its PID, its start and its group are still its own. Proving it lets the
	// caller cover and stop what it left in its scope; with Read, a child quick to exit left no
	// identity, and its scope could then only be killed at once or not covered at all.
	inc, err := procid.ReadChild(pid)
	switch {
	case errors.Is(err, procid.ErrGone):
		// Gone without a readable start (macOS may not show a zombie's): the group, which may
		// hold its children, is still pinned; only the leader's start is unknown.
	case err != nil:
		return nil, fmt.Errorf("scope: attach pid %d: %w", pid, err)
	case inc.PGID != pid && strict:
		// The child moved itself into another group between exec and now.
		return nil, fmt.Errorf("scope: attach pid %d: it is in process group %d, not its own", pid, inc.PGID)
	default:
		leader = inc.ID
	}
	return leaderScope(cmd, leader), nil
}

// leaderScope makes the scope of the group cmd's child leads, leader its identity so far.
func leaderScope(cmd *exec.Cmd, leader procid.ID) *Scope {
	// From the pidfd Go took at spawn: the leader's PID can be recycled once it is reaped, within
	// the tick it started in, and only this id tells that stranger apart (Linux 6.9+).
	leader.PidfdID, _ = procid.HandleID(cmd.Process)
	// The group keeps a pidfd of its own on the leader, a duplicate of that one: the child's is
	// closed when it is waited for, and from then on only a pidfd ties the group to its leader.
	g := checkedGroup(leader)
	g.fd = takeLeader(cmd.Process)
	return groupScope(g)
}

func groupScope(g *group) *Scope {
	return &Scope{leader: g.leader, sys: sysScope{group: g, m: processGroup{g}}}
}

// abort kills a child whose attach failed. When it was made to lead a group, the group goes too:
// the child may have started others already. Its pid is pinned while it is unreaped, which
// Attach's contract (nothing waits for it yet) guarantees, so kill(-pid) reaches only its group.
func abort(cmd *exec.Cmd) {
	if prepared(cmd) && cmd.ProcessState == nil {
		unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	}
	cmd.Process.Kill()
}

func fromGroup(pgid int, leader procid.ID) (*Scope, error) {
	if leader.PID == 0 {
		leader.PID = pgid
	}
	switch {
	case pgid <= 1:
		return nil, fmt.Errorf("scope: group %d: not a process group custody may signal", pgid)
	case leader.PID != pgid:
		return nil, fmt.Errorf("scope: group %d: leader %v does not lead it", pgid, leader)
	}
	return groupScope(pinnedGroup(leader)), nil
}

func bindGroup(pgid int, leader procid.ID) (*Scope, error) {
	g, err := boundGroup(pgid, leader)
	if err != nil {
		return nil, fmt.Errorf("scope: bind group %d: %w", pgid, err)
	}
	return groupScope(g), nil
}

func (s *Scope) pgid() int {
	if s.sys.group == nil {
		return 0
	}
	return s.sys.group.pgid
}

func unixSignal(sig os.Signal) (unix.Signal, error) {
	us, ok := sig.(unix.Signal)
	if !ok {
		return 0, fmt.Errorf("scope: signal %v: %w", sig, errors.ErrUnsupported)
	}
	return us, nil
}

func (s *Scope) signal(sig os.Signal) error {
	us, err := unixSignal(sig)
	if err != nil {
		return err
	}
	return s.sys.m.signal(us)
}

func (s *Scope) signalGroup(sig os.Signal) error {
	us, err := unixSignal(sig)
	if err != nil {
		return err
	}
	if s.sys.group == nil {
		return fmt.Errorf("scope: signal the group of %v: it has none recorded: %w", s, errors.ErrUnsupported)
	}
	return s.sys.group.signal(us)
}

func (s *Scope) pinned() bool                    { return s.sys.m.pinned() }
func (s *Scope) empty() (bool, error)            { return s.sys.m.empty() }
func (s *Scope) emptyIn(c *Census) (bool, error) { return s.sys.m.emptyIn(c) }
func (s *Scope) wait(ctx context.Context) error  { return s.sys.m.wait(ctx) }
func (s *Scope) describe() string                { return s.sys.m.describe() }

func (s *Scope) close() error {
	s.closeGroup()
	if err := s.sys.m.close(); err != nil {
		return fmt.Errorf("scope: close %v: %w", s, err)
	}
	return nil
}

func (s *Scope) release() error {
	s.closeGroup()
	s.sys.m.release()
	return nil
}

// closeGroup lets go of the group's pidfd on its leader.
func (s *Scope) closeGroup() {
	if s.sys.group != nil {
		s.sys.group.close()
	}
}

func (s *Scope) desc() Desc {
	d := Desc{Kind: s.kind(), Leader: s.leader, PGID: s.pgid()}
	s.sys.m.fill(&d)
	return d
}

// processGroup is the scope that is a process group.
type processGroup struct{ g *group }

func (m processGroup) kind() Kind                      { return KindGroup }
func (m processGroup) signal(sig unix.Signal) error    { return m.g.signal(sig) }
func (m processGroup) pinned() bool                    { return m.g.pinned() }
func (m processGroup) empty() (bool, error)            { return m.g.empty() }
func (m processGroup) emptyIn(c *Census) (bool, error) { return m.g.emptyIn(c) }
func (m processGroup) wait(ctx context.Context) error  { return m.g.wait(ctx) }
func (m processGroup) close() error                    { return nil } // the group's pidfd: closeGroup
func (m processGroup) release()                        {}
func (m processGroup) describe() string                { return fmt.Sprintf("pgrp %d", m.g.pgid) }
func (m processGroup) fill(*Desc)                      {}

// cgroupScope is the scope that is a cgroup.
type cgroupScope struct{ cg *cgroup }

func (m cgroupScope) kind() Kind                     { return KindCgroup }
func (m cgroupScope) signal(sig unix.Signal) error   { return m.cg.signal(sig) }
func (m cgroupScope) pinned() bool                   { return true }
func (m cgroupScope) emptyIn(*Census) (bool, error)  { return m.empty() }
func (m cgroupScope) wait(ctx context.Context) error { return m.cg.wait(ctx) }
func (m cgroupScope) close() error                   { return m.cg.teardown() }
func (m cgroupScope) release()                       { m.cg.close(); m.cg.disown() }
func (m cgroupScope) describe() string               { return "cgroup " + m.cg.rel }
func (m cgroupScope) fill(d *Desc)                   { d.Cgroup, d.CgroupID = m.cg.rel, m.cg.id }

func (m cgroupScope) empty() (bool, error) {
	pop, err := m.cg.populated()
	if errors.Is(err, procid.ErrGone) {
		return true, nil
	}
	return !pop, err
}

// closeWait bounds how long Close waits for a killed cgroup to empty before removing it.
const closeWait = time.Second

func open(d Desc) (*Scope, error) {
	switch d.Kind {
	case KindGroup:
		return fromGroup(d.PGID, d.Leader)
	case KindCgroup:
		cg, err := openRecorded(d.Cgroup, d.CgroupID)
		if err != nil {
			return nil, err
		}
		// The group serves job control only, which another process than the owner never does.
		g := checkedGroup(procid.ID{PID: d.PGID, Start: d.Leader.Start, PidfdID: d.Leader.PidfdID})
		return &Scope{leader: d.Leader, sys: sysScope{group: g, m: cgroupScope{cg}}}, nil
	}
	return nil, fmt.Errorf("scope: open %q scope: %w", d.Kind, errors.ErrUnsupported)
}

func (s *Scope) ask() (string, error) { return authority.AskSIGTERM, s.signal(syscall.SIGTERM) }
