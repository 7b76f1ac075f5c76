package scope_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/scope"
)

// A supervisor's cgroups (opened with OpenCgroup, their files held) are signalled as any scope
// is, and WaitAll returns those not yet empty: both while both live, the other once one is
// killed, none once both are.
func TestWaitAllCgroups(t *testing.T) {
	requireCgroups(t)
	var held []*scope.Scope
	var procs []func()
	for range 2 {
		p, s := startScoped(t)
		ready(t, p)
		h, err := scope.OpenCgroup(s.Desc().Cgroup)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Release() })
		held = append(held, h)
		procs = append(procs, func() { wantSignaled(t, p, syscall.SIGTERM) })
	}
	wait := func(d time.Duration) []*scope.Scope {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return scope.WaitAll(ctx, held)
	}
	if left := wait(20 * time.Millisecond); len(left) != 2 {
		t.Fatalf("WaitAll with both alive left %d scopes; want 2", len(left))
	}
	if err := held[0].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	procs[0]() // reaped: its cgroup is empty before WaitAll looks
	if left := wait(20 * time.Millisecond); len(left) != 1 || left[0] != held[1] {
		t.Fatalf("WaitAll after the first died left %v; want only %v", left, held[1])
	}
	if err := held[1].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Not reaped first: the wait is the epoll's, woken as the process exits.
	if left := wait(30 * time.Second); len(left) != 0 {
		t.Fatalf("WaitAll after both died left %v", left)
	}
	procs[1]()
	if slices.ContainsFunc(held, func(s *scope.Scope) bool { e, err := s.Empty(); return err != nil || !e }) {
		t.Fatal("a scope WaitAll saw empty is not")
	}
}

// WaitAll over every scope of a directory that also holds a process of its own waits through
// the directory, which stays populated: its rounds over the scopes see them empty.
func TestWaitAllDirPopulated(t *testing.T) {
	requireCgroups(t)
	var procs []*testproc.Proc
	var held []*scope.Scope
	for range 2 {
		p, _, h := heldScope(t)
		ready(t, p)
		procs, held = append(procs, p), append(held, h)
	}
	if !scope.WatchedThroughDir(t, held) {
		t.Fatal("the test's scopes are not all of their directory's: WaitAll would not wait through it")
	}
	lodger := testproc.Start(t, tree(t))
	ready(t, lodger)
	dir := filepath.Dir(scope.CgroupPath(t, held[0]))
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(lodger.Process.Pid)), 0); err != nil {
		t.Fatalf("move a process into the scopes' directory: %v", err)
	}
	t.Cleanup(func() { lodger.Stdin().Close(); lodger.Wait() })
	for i, err := range scope.SignalAll(held, syscall.SIGTERM) {
		if err != nil {
			t.Fatalf("SignalAll: scope %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if left := scope.WaitAll(ctx, held); len(left) != 0 {
		t.Fatalf("WaitAll left %v with their directory populated by another process", left)
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("WaitAll returned at its deadline: %v", err)
	}
	for _, p := range procs {
		wantSignaled(t, p, syscall.SIGTERM)
	}
}
