//go:build unix

package scope_test

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"golang.org/x/sys/unix"
)

// detach starts the child in a new session: a new group outside its parent's.
func detach(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
}

// cleanupScope kills what a test left in the scope (the identity check keeps it to the group) and
// removes a cgroup.
func cleanupScope(s *scope.Scope) {
	s.Signal(syscall.SIGKILL)
	s.Close()
}

// groupsOnly makes the test's scopes process groups, where a cgroup would be taken.
func groupsOnly(t *testing.T) { t.Setenv(scope.EnvContainment, "process-group") }

func pgid(t *testing.T, pid int) int {
	t.Helper()
	g, err := unix.Getpgid(pid)
	if err != nil {
		t.Fatalf("getpgid(%d): %v", pid, err)
	}
	return g
}

// wantSignaled checks that p was ended by sig.
func wantSignaled(t *testing.T, p *testproc.Proc, sig syscall.Signal) {
	t.Helper()
	p.Wait()
	ws, ok := p.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != sig {
		t.Fatalf("child ended with %v, want signal %v", p.ProcessState, sig)
	}
}

func TestGroupContainsTree(t *testing.T) {
	groupsOnly(t)
	adoptOrphans(t)
	p, s := startScoped(t, "-depth", "1")
	ids := ready(t, p)
	child, grand := ids[0], ids[1]

	if l := s.Leader(); s.Kind() != scope.KindGroup || s.PGID() != p.Process.Pid || l.PID != child.PID || l.Start != child.Start {
		t.Fatalf("scope %v: kind %q pgid %d leader %v; want pgrp, %d, %v", s, s.Kind(), s.PGID(), s.Leader(), p.Process.Pid, child)
	}
	// The leader's pidfs id comes from the pidfd Go took at spawn, where the kernel has them.
	if id, err := procid.HandleID(p.Process); s.Leader().PidfdID != id || err == nil && id == 0 {
		t.Errorf("leader's pidfs id %d; the spawn handle's %d (%v)", s.Leader().PidfdID, id, err)
	}
	if g := pgid(t, child.PID); g != child.PID || g == unix.Getpgrp() {
		t.Fatalf("child %d in group %d (the test's is %d); want its own", child.PID, g, unix.Getpgrp())
	}
	if g := pgid(t, grand.PID); g != child.PID {
		t.Fatalf("grandchild %d in group %d, want %d", grand.PID, g, child.PID)
	}
	if empty, err := s.Empty(); err != nil || empty {
		t.Fatalf("Empty() = %v, %v with two members", empty, err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop waiting")
	cancel(stop)
	mustIs(t, s.Wait(ctx), stop)

	ca, ga := acquire(t, child), acquire(t, grand)
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		waited <- s.Wait(ctx)
	}()
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, ca, ga)
	wantSignaled(t, p, syscall.SIGTERM)
	reapOrphan(t, grand.PID)
	if err := <-waited; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if empty, err := s.Empty(); err != nil || !empty {
		t.Fatalf("Empty() = %v, %v after both exited", empty, err)
	}
	mustIs(t, s.Signal(syscall.SIGTERM), procid.ErrGone)
}

// A process group does not contain a descendant that calls setsid(2): the known limit of a pgrp
// scope (a cgroup would contain it).
func TestSetsidEscapesGroup(t *testing.T) {
	groupsOnly(t)
	adoptOrphans(t)
	p, s := startScoped(t, "-depth", "1", "-setsid")
	ids := ready(t, p)
	child, esc := ids[0], ids[1]
	if g := pgid(t, esc.PID); g != esc.PID || g == s.PGID() {
		t.Fatalf("setsid grandchild %d in group %d; want its own, not %d", esc.PID, g, s.PGID())
	}
	ea := acquire(t, esc)
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Reap the child through os.Process, not exec.Cmd.Wait, which would close the stdin pipe
	// that is also the escapee's lifeline.
	st, err := p.Process.Wait()
	if ws, ok := st.Sys().(syscall.WaitStatus); err != nil || !ok || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("child ended with %v (%v), want SIGTERM", st, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if exited, err := ea.Exited(); err != nil || exited {
		t.Fatalf("escapee Exited() = %v, %v; want it alive outside the stopped scope", exited, err)
	}
	if err := esc.Verify(); err != nil {
		t.Fatalf("escapee: %v", err)
	}
	t.Logf("scope %v (leader %v) is empty; its setsid grandchild %v lives on", s, child, esc)
	// The test did not start the escapee: it stops it through proven authority.
	if err := ea.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, ea)
	reapOrphan(t, esc.PID)
}

func TestPrepareKeepsSetsid(t *testing.T) {
	cmd := tree(t)
	detach(cmd)
	prep, err := scope.Prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.SysProcAttr.Setpgid {
		t.Fatal("Prepare set Setpgid beside Setsid: the child's setpgid would fail")
	}
	p := testproc.Start(t, cmd)
	s, err := prep.Attach()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ready(t, p)
	if sid, err := unix.Getsid(p.Process.Pid); err != nil || sid != p.Process.Pid || s.PGID() != p.Process.Pid {
		t.Fatalf("sid %d (%v), scope pgid %d; want both %d", sid, err, s.PGID(), p.Process.Pid)
	}
	if err := s.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantSignaled(t, p, syscall.SIGKILL)
}

func TestPrepareRefusesJoiningGroup(t *testing.T) {
	cmd := tree(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: unix.Getpgrp()}
	if _, err := scope.Prepare(cmd); err == nil {
		t.Fatal("Prepare accepted a command that joins an existing group")
	}
}

// A Scope rebuilt from a ledger row signals only while the recorded leader's identity holds.
func TestFromGroup(t *testing.T) {
	groupsOnly(t)
	p, s := startScoped(t)
	ready(t, p)
	wrong, err := scope.FromGroup(s.PGID(), procid.ID{Start: s.Leader().Start + 1})
	if err != nil {
		t.Fatal(err)
	}
	err = wrong.Signal(syscall.SIGTERM)
	mustIs(t, err, authority.ErrNoAuthority, procid.ErrReused)

	own, err := scope.FromGroup(unix.Getpgrp(), procid.ID{})
	if err != nil {
		t.Fatal(err)
	}
	mustIs(t, own.Signal(syscall.SIGTERM), authority.ErrNoAuthority)

	for _, bad := range []struct {
		pgid   int
		leader procid.ID
	}{{0, procid.ID{}}, {1, procid.ID{}}, {-5, procid.ID{}}, {s.PGID(), procid.ID{PID: s.PGID() + 1}}} {
		if _, err := scope.FromGroup(bad.pgid, bad.leader); err == nil {
			t.Errorf("FromGroup(%d, %v) succeeded", bad.pgid, bad.leader)
		}
	}

	right, err := scope.FromGroup(s.PGID(), s.Leader())
	if err != nil {
		t.Fatal(err)
	}
	if right.Leader() != s.Leader() || right.PGID() != s.PGID() || right.Kind() != scope.KindGroup {
		t.Fatalf("FromGroup = %v leader %v; want %v leader %v", right, right.Leader(), s, s.Leader())
	}
	if err := right.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// SIGKILL, not the refused SIGTERM, ended it.
	wantSignaled(t, p, syscall.SIGKILL)
}
