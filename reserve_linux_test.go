package custody_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
)

func init() {
	testproc.Register("reserving-owner", helperReservingOwner)
	testproc.Register("idle-owner", helperIdleOwner)
}

// reservedDir returns the directory of o's reserved cgroup, failing the test when o has none.
func reservedDir(t *testing.T, o *custody.Owner) string {
	t.Helper()
	custody.AwaitReserved(o)
	rel := custody.Reserved(o)
	if rel == "" {
		t.Fatal("the owner holds no reserved cgroup after a start on the cgroup path")
	}
	return cgroupDir(t, rel)
}

// cgroupDir returns the directory of the scope cgroup rel, one this process's owners made.
func cgroupDir(t *testing.T, rel string) string {
	t.Helper()
	_, where, err := scope.Containment()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(where, filepath.Base(filepath.Dir(rel)), filepath.Base(rel))
}

// rowCgroup returns the cgroup of pid's row.
func rowCgroup(t *testing.T, l *ledger.Ledger, pid int) string {
	t.Helper()
	cg, err := rowCgroupOf(l, pid)
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// rowCgroupOf returns the cgroup of pid's row in l; helper processes, which have no test to fail,
// call it directly.
func rowCgroupOf(l *ledger.Ledger, pid int) (string, error) {
	rows, err := l.Rows(context.Background())
	if err != nil {
		return "", err
	}
	for _, r := range rows {
		if r.PID == pid {
			return r.Cgroup, nil
		}
	}
	return "", fmt.Errorf("no row for pid %d", pid)
}

// requireEmptyCgroup fails unless dir is a cgroup with no process in it or below it.
func requireEmptyCgroup(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		t.Fatalf("reserved cgroup: %v", err)
	}
	if !slices.Contains(strings.Split(string(b), "\n"), "populated 0") {
		t.Fatalf("reserved cgroup %s is not empty: %q", dir, b)
	}
}

// awaitGone waits until none of the cgroup directories dirs exists: their removal follows an
// owner's or a supervisor's act, in the background.
func awaitGone(t *testing.T, dirs ...string) {
	t.Helper()
	testproc.WaitFor(t, 10*time.Second, func() error {
		for _, dir := range dirs {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cgroup %s still exists (%v)", dir, err)
			}
		}
		return nil
	})
}

func requireGone(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup %s still exists (%v)", dir, err)
	}
}

// TestReserved: an owner makes no reservation at its first start; from its second start on the cgroup
// path it holds its next child's cgroup, made ahead and empty; the next child is born in it; a
// start told to give process groups removes it and makes none; Close removes the last one.
func TestReserved(t *testing.T) {
	requireCgroups(t)
	o := newOwner(t)
	start(t, o, custody.StartOptions{})
	custody.AwaitReserved(o)
	if s := custody.Reserved(o); s != "" {
		t.Errorf("a first start made a reserved %s", s)
	}
	c1, _, _ := start(t, o, custody.StartOptions{})
	reserved := reservedDir(t, o)
	requireEmptyCgroup(t, reserved)
	if got := cgroupDir(t, rowCgroup(t, o.Ledger, c1.ID.PID)); got == reserved {
		t.Fatalf("the reserved %s is the first child's own cgroup", reserved)
	}
	c2, _, _ := start(t, o, custody.StartOptions{})
	if got := cgroupDir(t, rowCgroup(t, o.Ledger, c2.ID.PID)); got != reserved {
		t.Errorf("second child born in %s, want the reserved %s", got, reserved)
	}
	next := reservedDir(t, o)
	requireEmptyCgroup(t, next)

	t.Setenv(scope.EnvContainment, scope.KindGroup.Containment())
	c3, _, _ := start(t, o, custody.StartOptions{})
	if got := rowCgroup(t, o.Ledger, c3.ID.PID); got != "" {
		t.Errorf("a child started with process groups asked for was born in cgroup %s", got)
	}
	requireGone(t, next)
	custody.AwaitReserved(o)
	if s := custody.Reserved(o); s != "" {
		t.Errorf("a process-group start left a reserved %s", s)
	}
	os.Setenv(scope.EnvContainment, "")

	start(t, o, custody.StartOptions{})
	last := reservedDir(t, o)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, last)
	requireGone(t, reserved)
}

// TestIdleOwnerHoldsNoCgroup: an owner whose children are all gone is left with no supervisor,
// its last one, which covered only the reservation, released as idle or dead; it then lets go of the
// reserved and of its empty directory, which no supervisor would remove at its death. Its next start
// makes both again and is covered by a new supervisor, whose sweep at the owner's SIGKILL leaves
// nothing. The owner is a helper process: the directory is the whole process's, and other tests'
// owners in this one hold scopes in it.
func TestIdleOwnerHoldsNoCgroup(t *testing.T) {
	requireCgroups(t)
	for _, end := range []string{"release", "death"} {
		t.Run("supervisor="+end, func(t *testing.T) { idleOwner(t, end) })
	}
}

func idleOwner(t *testing.T, end string) {
	owner := testproc.Start(t, testproc.Helper(t, "idle-owner", ledgerPath(t), end))
	f := owner.Expect("idle", 20*time.Second)
	if len(f) != 1 {
		t.Fatal("the owner held no reserved")
	}
	reserved := cgroupDir(t, f[0])
	ownerDir := filepath.Dir(reserved)
	// The owner lets go of them once told of the release, which it may still be doing when the
	// helper sees neither a supervisor nor a reservation.
	awaitGone(t, reserved, ownerDir)
	if _, err := io.WriteString(owner.Stdin(), "again\n"); err != nil {
		t.Fatal(err)
	}
	f = owner.Expect("child", 20*time.Second)
	if len(f) != 4 {
		t.Fatalf("child line %q", f)
	}
	child := incarnation(t, atoi(f[0]))
	if got := filepath.Dir(cgroupDir(t, f[1])); got != ownerDir {
		t.Errorf("child born in a cgroup of %s, want the owner's directory %s, made again", got, ownerDir)
	}
	if f[2] == "0" || f[3] != "1" {
		t.Errorf("after the start: supervisor %s covering %s, want one covering the child", f[2], f[3])
	}
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	testproc.WaitFor(t, 10*time.Second, func() error {
		if err := child.Verify(); err == nil {
			return fmt.Errorf("child %v still runs", child)
		}
		if _, err := os.Stat(ownerDir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the dead owner's cgroup %s is still there (%v)", ownerDir, err)
		}
		return nil
	})
}

// helperIdleOwner starts and stops two children, so that it holds a reservation, and waits for its
// supervisor, idle, to be released (args[1] "release") or kills it ("death"); it prints
// "idle <reserved>" once the reservation is gone too. At a line
// on its standard input it starts a third child and prints "child <pid> <cgroup> <supervisor pid>
// <covered>", then waits to be killed.
func helperIdleOwner(args []string) int {
	ctx := context.Background()
	sup := &supervise.Client{Grace: time.Second, IdleGrace: 20 * time.Millisecond}
	if args[1] == "death" {
		sup.IdleGrace = -1 // kept until Close
	}
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: sup}
	fail := func(err error) int {
		fmt.Println("error", err)
		return 1
	}
	var reserved string
	for i := range 2 {
		c, err := o.Start(ctx, exec.Command("sleep", "60"), custody.StartOptions{})
		if err != nil {
			return fail(err)
		}
		if i == 1 {
			custody.AwaitReserved(o)
			reserved = custody.Reserved(o)
		}
		if res := c.Stop(ctx, stop.Options{Grace: time.Second}); res.Outcome != stop.Exited {
			return fail(fmt.Errorf("stop: %+v", res))
		}
	}
	if args[1] == "death" {
		// Its own child, not reaped until the client's waiter reaps it: the PID names it.
		syscall.Kill(sup.PID(), syscall.SIGKILL)
	}
	if err := testproc.Poll(ctx, 10*time.Second, func() error {
		if sup.PID() != 0 || custody.Reserved(o) != "" {
			return errors.New("the supervisor was not released or lost, or the reserved is kept")
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	fmt.Println("idle", reserved)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fail(err)
	}
	c, err := o.Start(ctx, exec.Command("sleep", "60"), custody.StartOptions{})
	if err != nil {
		return fail(err)
	}
	cg, err := rowCgroupOf(o.Ledger, c.ID.PID)
	if err != nil {
		return fail(err)
	}
	fmt.Println("child", c.ID.PID, cg, sup.PID(), sup.Covered())
	select {}
}

// helperReservingOwner starts two children (reading the test's lifeline on fd 3), waits for its
// reserved and prints "child <pid>" for each, "reserved <cgroup>" and "ready", then waits to be killed.
func helperReservingOwner(args []string) int {
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: &supervise.Client{Grace: time.Second}}
	for range 2 {
		cmd := exec.Command("cat")
		cmd.Stdin = os.NewFile(3, "lifeline")
		c, err := o.Start(context.Background(), cmd, custody.StartOptions{})
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("child", c.ID.PID)
	}
	custody.AwaitReserved(o)
	fmt.Println("reserved", custody.Reserved(o))
	fmt.Println("ready")
	select {}
}

// TestReservedRemovedAtOwnerDeath: an owner SIGKILLed while it holds a reservation leaves neither its
// children nor any cgroup: its supervisor removes the reservation with the child's cgroup. And an owner
// killed while it was making its next reservation, which it had not covered yet (here a cgroup the test
// makes in the owner's directory, as the owner's background would have), leaves none either: the
// supervisor removes what is left of its dead owner's directory.
func TestReservedRemovedAtOwnerDeath(t *testing.T) {
	requireCgroups(t)
	for _, uncovered := range []bool{false, true} {
		t.Run(fmt.Sprintf("uncovered=%v", uncovered), func(t *testing.T) { spareAtOwnerDeath(t, uncovered) })
	}
}

func spareAtOwnerDeath(t *testing.T, uncovered bool) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	cmd := testproc.Helper(t, "reserving-owner", ledgerPath(t))
	cmd.ExtraFiles = []*os.File{r}
	owner := testproc.Start(t, cmd)
	r.Close()
	var children []procid.ID
	var reserved string
	for done := false; !done; {
		f := owner.Expect("", 20*time.Second)
		switch f[0] {
		case "child":
			children = append(children, incarnation(t, atoi(f[1])))
		case "reserved":
			if len(f) < 2 {
				t.Fatal("the owner holds no reserved")
			}
			reserved = cgroupDir(t, f[1])
		case "ready":
			done = true
		default:
			t.Fatal(f)
		}
	}
	requireEmptyCgroup(t, reserved)
	ownerDir := filepath.Dir(reserved)
	if uncovered {
		// A scope's name, one the owner would reach only after a million starts.
		extra := filepath.Join(ownerDir, "s999999")
		if err := os.Mkdir(extra, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(extra); os.Remove(ownerDir) }) // when the test failed
	}
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	testproc.WaitFor(t, 10*time.Second, func() error {
		for _, c := range children {
			if err := c.Verify(); err == nil {
				return fmt.Errorf("child %v still runs", c)
			}
		}
		if _, err := os.Stat(ownerDir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the dead owner's cgroup %s is still there (%v)", ownerDir, err)
		}
		return nil
	})
}
