package scope_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"golang.org/x/sys/unix"
)

// RemoveDeadOwner removes the empty cgroups of an owner directory whose owner is dead, and
// touches nothing of a live owner's; a path that is not a scope in an owner's directory is
// refused.
func TestRemoveDeadOwner(t *testing.T) {
	requireCgroups(t)
	ctx := context.Background()
	// A live owner's: this process's, with a reserved (empty, uncovered) cgroup in it.
	r, err := scope.Reserve()
	if err != nil || r == nil {
		t.Fatalf("reserve: %v, %v", r, err)
	}
	t.Cleanup(func() { r.Cancel() })
	_, where, err := scope.Containment()
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(where, filepath.Base(filepath.Dir(r.Cgroup())), filepath.Base(r.Cgroup()))
	// Looked at once (an ended ctx), and waited on until its ctx ends (a live owner never ends).
	once, cancel := context.WithCancel(ctx)
	cancel()
	awhile, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	for _, ctx := range []context.Context{once, awhile} {
		if err := scope.RemoveDeadOwner(ctx, r.Cgroup()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a live owner's empty cgroup was removed: %v", err)
	}

	// A dead owner's: named after a process that has exited, with two empty scopes.
	dead := deadIncarnation(t)
	var ns unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &ns); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("custody-%d-%d-%d", ns.Ino, dead.PID, dead.Start)
	dir := filepath.Join(where, name)
	for _, s := range []string{"s1", "s2"} {
		if err := os.MkdirAll(filepath.Join(dir, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(filepath.Join(dir, "s1")); os.Remove(filepath.Join(dir, "s2")); os.Remove(dir) })
	rel := filepath.Join(filepath.Dir(filepath.Dir(r.Cgroup())), name, "s1")
	if err := scope.RemoveDeadOwner(ctx, rel); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dead owner's directory %s is still there (%v)", dir, err)
	}

	if err := scope.RemoveDeadOwner(ctx, "/user.slice/s1"); err == nil {
		t.Fatal("a cgroup outside an owner's directory was accepted")
	}
}

// deadIncarnation returns the identity of a process that has exited and been reaped.
func deadIncarnation(t *testing.T) procid.ID {
	t.Helper()
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inc, err := procid.Read(cmd.Process.Pid)
	in.Close()
	cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return inc.ID
}
