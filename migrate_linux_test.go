package custody_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/reap"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.Register("migrating-owner", helperMigratingOwner) }

// TestMigratedLeaderIsReaped: a cgroup keeps in everything that calls setsid, setpgid or forks,
// but a process leaves it by writing its PID into a cgroup.procs outside it, given write access
// there and at the common ancestor: every process of root has it, in a delegated subtree every
// process of its user, and the service manager moves a process on request (systemd-run --scope).
// custody does not prevent that, and its owner's death then misses the child. Its row does not:
// the row outlives the owner, and reap stops the child through it.
func TestMigratedLeaderIsReaped(t *testing.T) {
	requireCgroups(t)
	testproc.RequireRoot(t) // it moves into the hierarchy's root
	path := ledgerPath(t)
	mark := testproc.Mark() // the child outlives its owner: killed at the end by its mark
	testproc.CleanupMarked(t, mark)
	cmd := testproc.Helper(t, "migrating-owner", path)
	cmd.Env = append(cmd.Env, mark)
	owner := testproc.Start(t, cmd)
	f := owner.Expect("child", 20*time.Second)
	if len(f) != 3 {
		t.Fatalf("child line %q", f)
	}
	pid, _ := strconv.Atoi(f[0])
	start, _ := strconv.ParseUint(f[1], 10, 64)
	child := procid.ID{PID: pid, Start: start}
	testproc.WaitFor(t, 10*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !strings.Contains(string(b), "0::/\n") {
			return fmt.Errorf("the child has not left its cgroup: %q, %v", b, err)
		}
		return nil
	})
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	awaitGone(t, f[2]) // the child's cgroup, by the supervisor
	if err := child.Verify(); err != nil {
		t.Fatalf("the child died with its owner although it had left its cgroup (%v): the docs say it does not", err)
	}
	ds, err := reap.Run(context.Background(), ledger.Open(path), reap.Options{Stop: stop.Options{Grace: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) == 0 || ds[0].PID != pid || ds[0].Action != reap.Reap || ds[0].Result == nil || ds[0].Result.Outcome != stop.Exited {
		t.Fatalf("reap decided %+v; want pid %d reaped and exited", ds, pid)
	}
	if err := child.Verify(); err == nil {
		t.Errorf("reap said exited, but the child %v runs", child)
	}
}

// helperMigratingOwner starts a child that moves itself into the root of the cgroup hierarchy
// (whose path it reads from its stdin), prints "child <pid> <start> <the child's own cgroup directory>" and waits to be killed.
func helperMigratingOwner(args []string) int {
	l := ledger.Open(args[0])
	o := &custody.Owner{Ledger: l, Supervisor: &supervise.Client{Grace: time.Second}}
	_, where, err := scope.Containment()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	cmd := exec.Command("sh", "-c", `read m && echo $$ > "$m/cgroup.procs" && exec sleep 300`)
	stdin, _ := cmd.StdinPipe()
	c, err := o.Start(context.Background(), cmd, custody.StartOptions{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	rel, err := rowCgroupOf(l, c.ID.PID)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	// The owner's directory sits in where: the hierarchy's root is where, less the path of
	// where below it.
	mount := strings.TrimSuffix(where, filepath.Dir(filepath.Dir(rel)))
	fmt.Println("child", c.ID.PID, c.ID.Start, filepath.Join(mount, rel))
	fmt.Fprintln(stdin, mount)
	select {}
}
