//go:build unix

package authority_test

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
)

// signalledBy reports whether the helper died of sig.
func (c *child) signalledBy(sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func TestSignalTermThroughHandle(t *testing.T) { signalTerm(t) }

func signalTerm(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	p, err := authority.Acquire(exactRecord(c.incarnation()))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer p.Close()
	if err := p.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("Signal(0): %v", err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	if err := p.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.waitExit()
	if !c.signalledBy(syscall.SIGTERM) {
		t.Errorf("helper ended with %v, want killed by SIGTERM", c.err)
	}
}

// startGroup starts a leader of a new process group and one member in it.
func startGroup(t *testing.T) (leader, member *child, g authority.Group) {
	leader = startHelper(t, "sleep", setpgid)
	inc := leader.incarnation()
	member = startHelper(t, "sleep", joinGroup(inc.PID))
	if m := member.incarnation(); m.PGID != inc.PID {
		t.Fatalf("member's pgid = %d, want %d", m.PGID, inc.PID)
	}
	return leader, member, authority.Group{PGID: inc.PID, Leader: inc.ID}
}

func mustHold(t *testing.T, g authority.Group, want bool) {
	t.Helper()
	got, err := g.Holds()
	if err != nil || got != want {
		t.Fatalf("%+v.Holds() = %v, %v; want %v, nil", g, got, err, want)
	}
}

func TestGroupLeaderAlive(t *testing.T) {
	leader, member, g := startGroup(t)
	mustHold(t, g, true)
	if empty, err := g.Empty(); err != nil || empty {
		t.Fatalf("Empty() = %v, %v; want false, nil", empty, err)
	}
	if err := g.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if err := g.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	leader.waitExit()
	member.waitExit()
	if !leader.signalledBy(syscall.SIGTERM) || !member.signalledBy(syscall.SIGTERM) {
		t.Errorf("leader, member ended with %v, %v; want both killed by SIGTERM", leader.err, member.err)
	}
	mustHold(t, g, false)
	err := g.Signal(syscall.SIGTERM)
	mustIs(t, err, procid.ErrGone)
	mustNotIs(t, err, authority.ErrNoAuthority)
}

func TestGroupHoldsThroughMembersAfterLeaderDies(t *testing.T) {
	leader, member, g := startGroup(t)
	p, err := authority.Acquire(exactRecord(leader.incarnation()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	leader.waitExit() // killed and reaped: the leader's PID is free, the group id is not
	if procid.Exists(g.PGID) {
		t.Fatalf("leader pid %d still exists after reaping", g.PGID)
	}
	mustHold(t, g, true)
	if err := g.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	if err := g.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	member.waitExit()
	if !member.signalledBy(syscall.SIGTERM) {
		t.Errorf("member ended with %v, want killed by SIGTERM", member.err)
	}
}

func TestGroupWrongLeaderRefusesAndSpares(t *testing.T) {
	leader, member, right := startGroup(t)
	wrongStart, wrongID := right, right
	wrongStart.Leader.Start++
	wrongStart.Leader.PidfdID = 0 // the start decides
	wrongID.Leader.PidfdID++      // the pidfs id decides, over an equal start
	for _, g := range []authority.Group{wrongStart, wrongID} {
		if right.Leader.PidfdID == 0 && g.Leader.PidfdID != 0 { // no pidfs ids on this kernel
			continue
		}
		mustHold(t, g, false)
		err := g.Signal(syscall.SIGTERM)
		t.Logf("Signal: %v", err)
		mustIs(t, err, authority.ErrNoAuthority, procid.ErrReused)
		mustNotIs(t, err, procid.ErrGone)
	}
	g := right

	g.Leader = procid.ID{} // start not recorded, leader alive: undecidable
	if ok, err := g.Holds(); ok || err == nil {
		t.Errorf("Holds() with an unrecorded leader start = %v, %v; want false and an error", ok, err)
	}
	err := g.Signal(syscall.SIGTERM)
	t.Logf("Signal: %v", err)
	mustIs(t, err, authority.ErrNoAuthority)

	leader.assertAlive()
	member.assertAlive()
	leader.stop()
	member.stop()
}

func TestGroupRefusesWideTargets(t *testing.T) {
	for _, pgid := range []int{-1, 0, 1, syscall.Getpgrp()} {
		g := authority.Group{PGID: pgid}
		err := g.Signal(syscall.Signal(0))
		mustIs(t, err, authority.ErrNoAuthority)
		if ok, err := g.Holds(); ok || err == nil {
			t.Errorf("Group{%d}.Holds() = %v, %v; want false and an error", pgid, ok, err)
		}
	}
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	err = authority.Group{PGID: 12345, Leader: self.ID}.Signal(syscall.Signal(0))
	mustIs(t, err, authority.ErrNoAuthority) // a leader that is not the group's leader
}

func TestSignalTypes(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	p, err := authority.Acquire(exactRecord(c.incarnation()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mustIs(t, p.Signal(fakeSignal{}), errors.ErrUnsupported)
	c.assertAlive()
	c.stop()
}

type fakeSignal struct{}

func (fakeSignal) String() string { return "fake" }
func (fakeSignal) Signal()        {}

var _ os.Signal = fakeSignal{}
