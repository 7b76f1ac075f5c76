//go:build unix

package scope_test

import (
	"context"
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// groupMode is one way a process-group scope proves its group: pinned by a pidfd on its leader
// (Linux 6.9+), or checked by its rule before each kill(-pgid): what macOS always does, and what a
// scope does once released, or on a kernel without PIDFD_SIGNAL_PROCESS_GROUP.
type groupMode struct {
	name   string
	pinned bool
	setup  func(t *testing.T) // before the scope is opened
	after  func(s *scope.Scope)
}

func groupModes() []groupMode {
	modes := []groupMode{{name: "checked", setup: func(*testing.T) {}, after: func(s *scope.Scope) { s.Release() }}}
	if scope.GroupSignalError() == nil {
		modes = append(modes,
			groupMode{name: "pinned", pinned: true, setup: func(*testing.T) {}, after: func(*scope.Scope) {}},
			groupMode{name: "no-group-flag", setup: scope.WithoutGroupSignal, after: func(*scope.Scope) {}})
	}
	return modes
}

// eachMode runs f once per groupMode, opening the group's scope with FromGroup as a stop does.
func eachMode(t *testing.T, f func(t *testing.T, m groupMode, open func(procid.ID) *scope.Scope)) {
	for _, m := range groupModes() {
		t.Run(m.name, func(t *testing.T) {
			m.setup(t)
			f(t, m, func(leader procid.ID) *scope.Scope {
				t.Helper()
				s, err := scope.FromGroup(leader.PID, leader)
				if err != nil {
					t.Fatalf("FromGroup(%v): %v", leader, err)
				}
				m.after(s)
				t.Cleanup(func() { s.Release() })
				return s
			})
		})
	}
}

// startGroup starts a tree helper leading a new process group and a second one in that group,
// and returns the leader's incarnation with its pidfs id where the kernel gives one.
func startGroup(t *testing.T) (leader, member *testproc.Proc, id procid.ID) {
	t.Helper()
	lc := tree(t)
	lc.SysProcAttr.Setpgid = true
	leader = testproc.Start(t, lc)
	ready(t, leader)
	inc, err := procid.ReadExact(leader.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	mc := tree(t)
	mc.SysProcAttr.Setpgid, mc.SysProcAttr.Pgid = true, inc.PID
	member = testproc.Start(t, mc)
	ready(t, member)
	if g := pgid(t, member.Process.Pid); g != inc.PID {
		t.Fatalf("member's pgid = %d, want %d", g, inc.PID)
	}
	return leader, member, inc.ID
}

// waitCtx bounds a wait of the test's.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustNotIs(t *testing.T, err, target error) {
	t.Helper()
	if errors.Is(err, target) {
		t.Fatalf("error %v: want !errors.Is(err, %v)", err, target)
	}
}

func mustAlive(t *testing.T, ps ...*testproc.Proc) {
	t.Helper()
	for _, p := range ps {
		if err := p.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("pid %d: %v; want it alive", p.Process.Pid, err)
		}
	}
}

func TestGroupSignalsEveryMember(t *testing.T) {
	eachMode(t, func(t *testing.T, m groupMode, open func(procid.ID) *scope.Scope) {
		leader, member, id := startGroup(t)
		s := open(id)
		if s.Pinned() != m.pinned {
			t.Fatalf("Pinned() = %v; want %v", s.Pinned(), m.pinned)
		}
		if err := s.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("Signal(0): %v", err)
		}
		if empty, err := s.Empty(); err != nil || empty {
			t.Fatalf("Empty() = %v, %v; want false, nil", empty, err)
		}
		var before scope.Census
		if empty, err := s.EmptyIn(&before); err != nil || empty {
			t.Fatalf("EmptyIn() = %v, %v; want false, nil", empty, err)
		}
		if err := s.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("Signal: %v", err)
		}
		if err := s.Wait(waitCtx(t)); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		// Exited, not yet reaped: kill(2) and the pidfd still count the zombies; a census does not.
		var after scope.Census
		if empty, err := s.EmptyIn(&after); err != nil || !empty {
			t.Fatalf("EmptyIn() of a group of zombies = %v, %v; want true, nil", empty, err)
		}
		wantSignaled(t, leader, syscall.SIGTERM)
		wantSignaled(t, member, syscall.SIGTERM)
		err := s.Signal(syscall.SIGTERM)
		mustIs(t, err, procid.ErrGone)
		mustNotIs(t, err, authority.ErrNoAuthority)
	})
}

// A group whose leader exited and was reaped is still the recorded group while members hold its
// id; a pinned scope reaches them through the leader's pidfd, a checked one by the rule.
func TestGroupHoldsThroughMembersAfterLeaderDies(t *testing.T) {
	eachMode(t, func(t *testing.T, m groupMode, open func(procid.ID) *scope.Scope) {
		leader, member, id := startGroup(t)
		s := open(id) // while the leader lives: a pidfd can only be proven on a live leader
		leader.Process.Kill()
		leader.Wait() // reaped: the leader's PID is free, the group id is not
		if procid.Exists(id.PID) {
			t.Fatalf("leader pid %d still exists after reaping", id.PID)
		}
		if s.Pinned() != m.pinned {
			t.Fatalf("Pinned() = %v; want %v", s.Pinned(), m.pinned)
		}
		if err := s.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("Signal: %v", err)
		}
		if err := s.Wait(waitCtx(t)); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		wantSignaled(t, member, syscall.SIGTERM)
	})
}

// A scope opened for another leader incarnation than the live one is not pinned, and refuses
// to signal; so does one whose leader's start was not recorded while its PID is alive.
func TestGroupWrongLeaderRefusesAndSpares(t *testing.T) {
	eachMode(t, func(t *testing.T, m groupMode, open func(procid.ID) *scope.Scope) {
		leader, member, right := startGroup(t)
		wrongStart, wrongID, unknown := right, right, procid.ID{PID: right.PID}
		wrongStart.Start++
		wrongStart.PidfdID = 0 // the start decides
		wrongID.PidfdID++      // the pidfs id decides, over an equal start
		for _, id := range []procid.ID{wrongStart, wrongID, unknown} {
			if right.PidfdID == 0 && id.PidfdID != 0 { // no pidfs ids on this kernel
				continue
			}
			s := open(id)
			if s.Pinned() {
				t.Errorf("FromGroup(%v) with %v alive is pinned", id, right)
			}
			err := s.Signal(syscall.SIGTERM)
			t.Logf("Signal(%v): %v", id, err)
			mustIs(t, err, authority.ErrNoAuthority)
			if id != unknown {
				mustIs(t, err, procid.ErrReused)
			}
			mustNotIs(t, err, procid.ErrGone)
		}
		mustAlive(t, leader, member)
	})
}

func TestGroupRefusesWideTargets(t *testing.T) {
	for _, pgid := range []int{-1, 0, 1} {
		if _, err := scope.FromGroup(pgid, procid.ID{}); err == nil {
			t.Errorf("FromGroup(%d) succeeded", pgid)
		}
		if _, err := scope.BindGroup(pgid, procid.ID{}); !errors.Is(err, authority.ErrNoAuthority) {
			t.Errorf("BindGroup(%d): %v; want an error wrapping ErrNoAuthority", pgid, err)
		}
	}
	own, err := scope.FromGroup(syscall.Getpgrp(), procid.ID{})
	if err != nil {
		t.Fatal(err)
	}
	mustIs(t, own.Signal(syscall.Signal(0)), authority.ErrNoAuthority)
	_, err = scope.BindGroup(syscall.Getpgrp(), procid.ID{})
	mustIs(t, err, authority.ErrNoAuthority)
}

// BindGroup binds what it finds, as a supervisor does on its owner's word: a live leader whatever
// its start was said to be unknown, and pinned where the kernel can; a stranger at the leader's
// PID is refused; a group with members but no leader is bound as given; an empty one is gone.
func TestBindGroup(t *testing.T) {
	leader, member, id := startGroup(t)
	s, err := scope.BindGroup(id.PID, procid.ID{}) // start unknown: the live leader is bound
	if err != nil {
		t.Fatalf("BindGroup with the start unknown: %v", err)
	}
	defer s.Release()
	if want := scope.GroupSignalError() == nil; s.Leader().Start != id.Start || s.Pinned() != want {
		t.Errorf("bound leader %v, pinned %v; want start %d, pinned %v", s.Leader(), s.Pinned(), id.Start, want)
	}
	_, err = scope.BindGroup(id.PID, procid.ID{Start: id.Start + 1})
	mustIs(t, err, authority.ErrNoAuthority, procid.ErrReused)
	if id.PidfdID != 0 {
		_, err = scope.BindGroup(id.PID, procid.ID{Start: id.Start, PidfdID: id.PidfdID + 1})
		mustIs(t, err, authority.ErrNoAuthority, procid.ErrReused)
	}

	leader.Process.Kill()
	leader.Wait()
	orphaned, err := scope.BindGroup(id.PID, id)
	if err != nil {
		t.Fatalf("BindGroup with only a member left: %v", err)
	}
	defer orphaned.Release()
	if err := orphaned.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	wantSignaled(t, member, syscall.SIGKILL)
	testproc.WaitFor(t, testproc.WaitDelay, func() error {
		_, err := scope.BindGroup(id.PID, id)
		if !errors.Is(err, procid.ErrGone) {
			return errors.New("an empty group is not reported gone")
		}
		return nil
	})
}

// The probe finds the group signal on this kernel, and a kernel without it is reported so.
func TestGroupSignalProbe(t *testing.T) {
	if runtime.GOOS != "linux" {
		mustIs(t, scope.GroupSignalError(), errors.ErrUnsupported)
		return
	}
	if err := scope.GroupSignalError(); err != nil {
		testproc.Skip(t, "skipping: no group signal through a pidfd (Linux 6.9+): %v", err)
	}
	scope.WithoutGroupSignal(t)
	mustIs(t, scope.GroupSignalError(), errors.ErrUnsupported)
}
