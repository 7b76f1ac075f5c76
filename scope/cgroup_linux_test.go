package scope_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// requireCgroups skips (or, in a privileged run, fails) unless this process's children get
// cgroup scopes, naming why not.
func requireCgroups(t *testing.T) {
	t.Helper()
	if kind, _, why := scope.Containment(); kind != scope.KindCgroup {
		testproc.Skip(t, "no cgroup containment for this process: %v", why)
	}
}

// cgroupOf reads a process's cgroup v2 path.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return strings.TrimSpace(p)
		}
	}
	t.Fatalf("pid %d has no cgroup v2 line", pid)
	return ""
}

func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// A descendant that calls setsid(2) stays in the cgroup, and a stop of the scope reaches it.
func TestCgroupContainsSetsid(t *testing.T) {
	requireCgroups(t)
	adoptOrphans(t)
	p, s := startScoped(t, "-depth", "1", "-setsid")
	ids := ready(t, p)
	child, esc := ids[0], ids[1]
	d := s.Desc()
	if s.Kind() != scope.KindCgroup || d.Cgroup == "" || d.CgroupID == 0 || s.Leader().PID != child.PID || s.Leader().Start != child.Start {
		t.Fatalf("scope %v: %+v; want a cgroup led by %v", s, d, child)
	}
	for _, id := range ids {
		if got := cgroupOf(t, id.PID); got != d.Cgroup {
			t.Fatalf("pid %d in cgroup %s, want %s", id.PID, got, d.Cgroup)
		}
	}
	if pgid(t, esc.PID) == s.PGID() {
		t.Fatalf("the setsid grandchild stayed in group %d", s.PGID())
	}
	ca, ea := acquire(t, child), acquire(t, esc)
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, ca, ea)
	reapOrphan(t, esc.PID)
	// Reap the child through os.Process: exec.Cmd.Wait would wait for the escapee's pipes too.
	if _, err := p.Process.Wait(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	mustIs(t, s.Signal(syscall.SIGTERM), procid.ErrGone)
	path := scope.CgroupPath(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cgroup %s after Close: %v; want it removed", path, err)
	}
}

// SIGKILL is cgroup.kill: a whole tree, escapees included, in one write.
func TestCgroupKill(t *testing.T) {
	requireCgroups(t)
	adoptOrphans(t)
	p, s := startScoped(t, "-depth", "2", "-setsid")
	ids := ready(t, p)
	var as []*authority.Process
	for _, id := range ids {
		as = append(as, acquire(t, id))
	}
	if err := s.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, as...)
	for _, id := range ids[1:] {
		reapOrphan(t, id.PID)
	}
	p.Process.Wait()
	if empty, err := s.Empty(); err != nil || !empty {
		t.Fatalf("Empty() = %v, %v after cgroup.kill", empty, err)
	}
}

// A scope rebuilt from its description proves its cgroup id; a wrong id, a cgroup custody did
// not make, or a removed one are refused.
func TestOpenCgroupDesc(t *testing.T) {
	requireCgroups(t)
	p, s := startScoped(t)
	ready(t, p)
	d := s.Desc()

	wrong := d
	wrong.CgroupID++
	_, err := scope.Open(wrong)
	mustIs(t, err, authority.ErrNoAuthority, procid.ErrReused)
	for _, rel := range []string{filepath.Dir(d.Cgroup), "/", d.Cgroup + "/../../x/s1"} {
		bad := d
		bad.Cgroup = rel
		if _, err := scope.Open(bad); !errors.Is(err, authority.ErrNoAuthority) {
			t.Errorf("Open(%q) = %v; want no authority", rel, err)
		}
	}

	right, err := scope.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := right.Desc(); got != d {
		t.Fatalf("Open(%+v).Desc() = %+v", d, got)
	}
	if err := right.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wantSignaled(t, p, syscall.SIGKILL)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = scope.Open(d)
	mustIs(t, err, procid.ErrGone)
	right.Close()
}

// An owner running in a custody cgroup makes its scopes below its own: the outer scope's kill
// reaches them.
func TestCgroupNested(t *testing.T) {
	requireCgroups(t)
	adoptOrphans(t)
	p, s := startScoped(t, "-depth", "1", "-scope")
	ids := ready(t, p)
	inner := cgroupOf(t, ids[1].PID)
	outer := s.Desc().Cgroup
	if inner == outer || !under(inner, outer) {
		t.Fatalf("nested scope %s is not below the outer %s", inner, outer)
	}
	ga := acquire(t, ids[1])
	if err := s.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, ga)
	reapOrphan(t, ids[1].PID)
	p.Process.Wait()
	path := scope.CgroupPath(t, s)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("outer cgroup with the dead inner owner's below it: %v; want all removed", err)
	}
}
