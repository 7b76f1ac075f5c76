package reaper_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/reaper"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/supervise"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	custody.Init() // the owner's supervisor is this binary, re-executed
	testproc.RunHelper()
	os.Exit(m.Run())
}

// start starts the reaper for the test process, or skips without what it needs.
func start(t *testing.T) *reaper.Reaper {
	t.Helper()
	r, err := reaper.Start()
	if err != nil {
		r.Close()
		testproc.Skip(t, "cannot reap orphans: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// orphanTree is a shell that leaves an orphan which exits at once: a zombie re-parented to the
// test process, its subreaper, for the reaper to reap.
var orphanTree = []string{"sh", "-c", "(sh -c 'exit 3' &)"}

// TestWaiterKeepsStatus: a child that has exited but that its waiter has not reaped yet (a
// waiter delayed as long as one likes) is left to it by a reaping pass, whose orphan is reaped:
// the waiter gets the child's own exit status.
func TestWaiterKeepsStatus(t *testing.T) {
	r := start(t)
	for i := range 20 {
		cmd := exec.Command("sh", "-c", fmt.Sprintf("exit %d", 10+i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := exec.Command(orphanTree[0], orphanTree[1:]...).Run(); err != nil {
			t.Fatal(err)
		}
		testproc.WaitFor(t, time.Minute, func() error {
			if ppid(cmd.Process.Pid) != os.Getpid() {
				t.Fatalf("child %d was reaped before its waiter ran", cmd.Process.Pid)
			}
			if z := zombies(); !slices.Contains(z, cmd.Process.Pid) {
				return fmt.Errorf("child %d is not a zombie yet (zombies %v)", cmd.Process.Pid, z)
			}
			return nil
		})
		reaper.Reap(r)
		var ee *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 10+i {
			t.Fatalf("the waiter of child %d, delayed past a reaping pass, got %v; want exit status %d",
				cmd.Process.Pid, err, 10+i)
		}
	}
	noZombies(t)
}

// TestManyWaiters: many short children started through os/exec and through a custody Owner, each
// waited by its own waiter, while orphans are re-parented and reaped: every waiter gets its
// child's status, and no zombie is left.
func TestManyWaiters(t *testing.T) {
	start(t)
	owner := &custody.Owner{Ledger: ledger.Open(filepath.Join(t.TempDir(), "l.json")),
		Supervisor: &supervise.Client{Grace: time.Second}}
	defer owner.Supervisor.Close()
	defer owner.Close()
	ctx := context.Background()
	stopOrphans := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stopOrphans:
				return
			default:
			}
			exec.Command(orphanTree[0], orphanTree[1:]...).Run()
		}
	})
	errs := make(chan error, 64)
	var waiters sync.WaitGroup
	for g := range 4 {
		waiters.Go(func() {
			for i := range 10 {
				code := 10 + 10*g + i
				cmd := exec.Command("sh", "-c", fmt.Sprintf("exit %d", code))
				var err error
				if g%2 == 0 {
					err = cmd.Run()
				} else {
					var c *custody.Child
					if c, err = owner.Start(ctx, cmd, custody.StartOptions{Purpose: "short"}); err != nil {
						errs <- fmt.Errorf("owner start: %w", err)
						return
					}
					err = c.Wait()
					c.Release(ctx)
				}
				if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != code {
					errs <- fmt.Errorf("a short child's waiter got %v; want exit status %d", err, code)
				}
			}
		})
	}
	waiters.Wait()
	close(stopOrphans)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	noZombies(t)
}

// TestStopOrphans: Stop ends the orphans still running and reaps them, and leaves alone a child
// that its waiter still waits for.
func TestStopOrphans(t *testing.T) {
	r := start(t)
	// An earlier test's last orphan may not have run yet on a loaded machine (TestManyWaiters
	// makes them until it ends): Stop would count it too. Start from no live child. (A zombie
	// may be left, whose SIGCHLD came before this reaper ran: Stop reaps it without counting.)
	noneAlive(t)
	own := exec.Command("sleep", "600")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	defer own.Process.Kill()
	out, err := exec.Command("sh", "-c", "sleep 601 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, _ := strconv.Atoi(string(bytes.TrimSpace(out)))
	testproc.WaitFor(t, time.Minute, func() error {
		if ppid(orphan) != os.Getpid() {
			return fmt.Errorf("orphan %d not re-parented to the test yet", orphan)
		}
		return nil
	})
	if n := r.Stop(5 * time.Second); n != 1 {
		t.Errorf("Stop signalled %d orphans; want 1", n)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", orphan)); err == nil && ppid(orphan) == os.Getpid() {
		t.Errorf("orphan %d is still the test's child after Stop", orphan)
	}
	if err := own.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the test's own child after Stop: %v; want it left running", err)
	}
	own.Process.Kill()
	if ee, ok := errors.AsType[*exec.ExitError](own.Wait()); !ok || ee.String() != "signal: killed" {
		t.Fatalf("the test's own child: %v; want it killed by the test's SIGKILL, its status its waiter's", ee)
	}
}

// TestStopReapsExited: where no orphan is alive (custody run's usual end), Stop signals none and
// reaps, in the same pass, the orphans that have exited, and leaves the exited child that its
// waiter has not reaped yet to that waiter. The reaper here has no pass of its own on SIGCHLD,
// so what is reaped is Stop's.
func TestStopReapsExited(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		testproc.Skip(t, "cannot be a subreaper: %v", err)
	}
	r := reaper.Idle()
	own := exec.Command("sh", "-c", "exit 7")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(orphanTree[0], orphanTree[1:]...).Run(); err != nil {
		t.Fatal(err)
	}
	// Every child exited, the orphan too: a zombie an earlier test left would otherwise make two
	// while the orphan still ran.
	testproc.WaitFor(t, time.Minute, func() error {
		if z, l := zombies(), live(); len(z) < 2 || len(l) > 0 {
			return fmt.Errorf("zombies %v, alive %v: want the waited child %d and an orphan, both exited", z, l, own.Process.Pid)
		}
		return nil
	})
	if n := r.Stop(time.Second); n != 0 {
		t.Errorf("Stop signalled %d orphans; want none, none was alive", n)
	}
	if z := zombies(); len(z) != 1 || z[0] != own.Process.Pid {
		t.Errorf("zombies after Stop: %v; want only the waited child %d", z, own.Process.Pid)
	}
	if ee, ok := errors.AsType[*exec.ExitError](own.Wait()); !ok || ee.ExitCode() != 7 {
		t.Errorf("the waited child: %v; want its own exit status 7, from its waiter", ee)
	}
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	p, _ := strconv.Atoi(string(f[1]))
	return p
}

// children lists the test process's children, each with its state (R, S, Z…).
func children() map[int]byte {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	out := make(map[int]byte)
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, f := range bytes.Fields(b) {
			st, err := os.ReadFile("/proc/" + string(f) + "/stat")
			if i := bytes.LastIndexByte(st, ')'); err == nil && i >= 0 && i+2 < len(st) {
				pid, _ := strconv.Atoi(string(f))
				out[pid] = st[i+2]
			}
		}
	}
	return out
}

// zombies lists the test process's children that are zombies.
func zombies() []int { return childrenWhere(func(state byte) bool { return state == 'Z' }) }

// live lists the test process's children that are not zombies.
func live() []int { return childrenWhere(func(state byte) bool { return state != 'Z' }) }

func childrenWhere(keep func(state byte) bool) []int {
	var out []int
	for pid, state := range children() {
		if keep(state) {
			out = append(out, pid)
		}
	}
	return out
}

// noneAlive waits until the test process has no live child.
func noneAlive(t *testing.T) {
	t.Helper()
	awaitNone(t, "children of earlier tests still alive", live)
}

func noZombies(t *testing.T) {
	t.Helper()
	awaitNone(t, "zombies left", zombies)
}

// awaitNone waits until list returns no PID.
func awaitNone(t *testing.T, what string, list func() []int) {
	t.Helper()
	testproc.WaitFor(t, time.Minute, func() error {
		if l := list(); len(l) > 0 {
			return fmt.Errorf("%s: %v", what, l)
		}
		return nil
	})
}
