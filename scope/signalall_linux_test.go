package scope_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/scope"
)

// heldScope starts a tree helper in a cgroup scope and opens that scope as a supervisor does
// (OpenCgroup: its files held).
func heldScope(t *testing.T, args ...string) (*testproc.Proc, *scope.Scope, *scope.Scope) {
	t.Helper()
	p, s := startScoped(t, args...)
	h, err := scope.OpenCgroup(s.Desc().Cgroup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Release() })
	return p, s, h
}

// SignalAll over scopes with no cgroup below them (asked once for their directory) signals each
// scope's child.
func TestSignalAllFlat(t *testing.T) {
	requireCgroups(t)
	var procs []*testproc.Proc
	var held []*scope.Scope
	for range 2 {
		p, _, h := heldScope(t)
		ready(t, p)
		procs, held = append(procs, p), append(held, h)
	}
	for i, err := range scope.SignalAll(held, syscall.SIGTERM) {
		if err != nil {
			t.Fatalf("SignalAll: scope %d: %v", i, err)
		}
	}
	for _, p := range procs {
		wantSignaled(t, p, syscall.SIGTERM)
	}
}

// SignalAll reaches a process in a cgroup below one of the scopes (a nested owner's scope), though
// the other scope of the directory has none: whether cgroups lie below is asked of the directory
// as a whole, and then of each scope.
func TestSignalAllNested(t *testing.T) {
	requireCgroups(t)
	adoptOrphans(t)
	flat, _, flatHeld := heldScope(t)
	ready(t, flat)
	p, s, h := heldScope(t, "-depth", "1", "-scope")
	ids := ready(t, p)
	if inner := cgroupOf(t, ids[1].PID); inner == s.Desc().Cgroup || !under(inner, s.Desc().Cgroup) {
		t.Fatalf("nested scope %s is not below %s", inner, s.Desc().Cgroup)
	}
	inner := acquire(t, ids[1])
	for i, err := range scope.SignalAll([]*scope.Scope{flatHeld, h}, syscall.SIGTERM) {
		if err != nil {
			t.Fatalf("SignalAll: scope %d: %v", i, err)
		}
	}
	// First: its lifeline (the test's pipe to p) stays open until p is waited for, so only the
	// SIGTERM can end it now.
	waitExit(t, 30*time.Second, inner)
	reapOrphan(t, ids[1].PID)
	wantSignaled(t, flat, syscall.SIGTERM)
	wantSignaled(t, p, syscall.SIGTERM)
}
