package supervise_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	testproc.WaitFor(t, 30*time.Second, func() error {
		reapOrphan(t, sup)
		if present(sup) {
			return fmt.Errorf("the supervisor %v outlives its owner", sup)
		}
		return nil
	})
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
