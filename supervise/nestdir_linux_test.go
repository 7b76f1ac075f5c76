package supervise_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

func init() {
	// stalled-owner starts a supervisor that never says it is ready (a cat of the owner's pipe,
	// which ends at the owner's death), with a nest socket, and blocks in Start.
	testproc.Register("stalled-owner", func([]string) int {
		c := &supervise.Client{Command: []string{"sh", "-c", "exec cat >/dev/null", "sh"}, StartTimeout: time.Hour}
		c.Start()
		return 0
	})
}

// nestDirs lists the custody-nest-* directories in dir.
func nestDirs(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "custody-nest-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An owner killed while its supervisor starts leaves no nest directory: the supervisor makes it,
// and removes it as it exits.
func TestNestDirAfterOwnerKilledMidStart(t *testing.T) {
	tmp := testproc.TempDir(t)
	owner := startHelper(t, "stalled-owner", nil, helperOpts{env: []string{"TMPDIR=" + tmp,
		scope.EnvContainment + "=process-group"}})
	var sup procid.ID
	testproc.WaitFor(t, 30*time.Second, func() error {
		kids := childrenOf(owner.cmd.Process.Pid)
		if len(kids) == 0 {
			return errors.New("no supervisor yet")
		}
		inc, err := procid.Read(kids[0])
		sup = inc.ID
		return err
	})
	owner.cmd.Process.Signal(syscall.SIGKILL)
	owner.wait(30 * time.Second)
	awaitSupervisorGone(t, sup)
	if left := nestDirs(t, tmp); len(left) > 0 {
		t.Errorf("after the owner's death mid-start: %v left", left)
	}
}

// On the cgroup path nested owners nest in cgroups: no nest directory is made.
func TestNoNestDirOnCgroupPath(t *testing.T) {
	if kind, _, why := scope.Containment(); kind != scope.KindCgroup {
		requireCapability(t, "cgroup containment", why)
	}
	tmp := testproc.TempDir(t)
	t.Setenv("TMPDIR", tmp)
	c := &supervise.Client{Grace: time.Second}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if p, left := c.NestSocket(), nestDirs(t, tmp); p != "" || len(left) > 0 {
		t.Errorf("on the cgroup path: nest socket %q, directories %v; want none", p, left)
	}
}

// childrenOf lists pid's children.
func childrenOf(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(w); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// An owner and its supervisor killed together (a container's or a CI job's whole tree, say)
// leave their nest directory, with nobody left to remove it: the next supervisor that makes a
// nest in the same temporary directory removes it, since nobody holds its lock.
func TestNestDirSweptAfterOwnerAndSupervisorKilled(t *testing.T) {
	requireCapability(t, "subreaper", reaperErr)
	tmp := testproc.TempDir(t)
	env := []string{"TMPDIR=" + tmp, scope.EnvContainment + "=process-group"}
	o := startHelper(t, "owner", []string{"-idle", "1h"}, helperOpts{env: env, setpgid: true,
		extra: []*os.File{newLifeline(t)}, stdout: true})
	ids := readyIDs(t, o.call("spawn cat 1"))
	o.call(fmt.Sprintf("stop %d", ids[0].PID)) // the supervisor stays, idle
	sup := supID(t, o.call("sup"))
	left := nestDirs(t, tmp)
	if len(left) != 1 {
		t.Fatalf("nest directories of a running owner: %v, want one", left)
	}
	// Both killed: the owner stopped first, so that it starts no replacement in between.
	if err := o.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := sup.Verify(); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(sup.PID, syscall.SIGKILL) // right after proving the incarnation, as TestSupervisorKilled
	o.cmd.Process.Kill()
	o.wait(30 * time.Second)
	awaitSupervisorGone(t, sup)
	if got := nestDirs(t, tmp); !slices.Equal(got, left) {
		t.Fatalf("after both were killed: %v, want %v left", got, left)
	}

	t.Setenv("TMPDIR", tmp)
	t.Setenv(scope.EnvContainment, "process-group")
	c := &supervise.Client{Grace: time.Second}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	own := filepath.Dir(c.NestSocket())
	testproc.WaitFor(t, 10*time.Second, func() error {
		if got := nestDirs(t, tmp); !slices.Equal(got, []string{own}) {
			return fmt.Errorf("nest directories %v, want only the new supervisor's %s", got, own)
		}
		return nil
	})
}

// While a supervisor is lost and its replacement not yet listening, its owner's lock keeps the
// nest directory, whose path the owner's children hold, from a sweep.
func TestNestDirHeldByOwnerBetweenSupervisors(t *testing.T) {
	requireCapability(t, "subreaper", reaperErr)
	tmp := testproc.TempDir(t)
	hold := filepath.Join(tmp, "go")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TMPDIR=" + tmp, scope.EnvContainment + "=process-group", envHold + "=" + hold}
	o := startHelper(t, "owner", []string{"-idle", "1h"}, helperOpts{env: env, setpgid: true,
		extra: []*os.File{newLifeline(t)}, stdout: true})
	ids := readyIDs(t, o.call("spawn cat 1"))
	s1 := supID(t, o.call("sup"))
	dirs := nestDirs(t, tmp)
	if len(dirs) != 1 {
		t.Fatalf("nest directories of a running owner: %v, want one", dirs)
	}
	// The replacement waits before it runs (holdSupervisor) until the file is back.
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if err := s1.Verify(); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(s1.PID, syscall.SIGKILL)
	testproc.WaitFor(t, 10*time.Second, func() error {
		if present(s1) {
			return fmt.Errorf("the killed supervisor %v is still there", s1)
		}
		return nil
	})
	if removed := supervise.SweepNestDirs(tmp, ""); len(removed) > 0 {
		t.Errorf("a sweep with the owner alive removed %v", removed)
	}
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := supID(t, o.call(fmt.Sprintf("waitsup %d", s1.PID)))
	if got := nestDirs(t, tmp); !slices.Equal(got, dirs) {
		t.Errorf("the replacement's nest directories: %v, want %v", got, dirs)
	}
	o.call(fmt.Sprintf("stop %d", ids[0].PID))
	o.call("close")
	settle(t, s2)
}

// awaitSupervisorGone waits until the killed or orphaned supervisor sup has exited, reaping it
// if it became this process's child.
func awaitSupervisorGone(t *testing.T, sup procid.ID) {
	t.Helper()
	testproc.WaitFor(t, 30*time.Second, func() error {
		reapOrphan(t, sup)
		if present(sup) {
			return fmt.Errorf("the supervisor %v is still there", sup)
		}
		return nil
	})
}
