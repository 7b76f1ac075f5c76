//go:build unix

package custody_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/tag"
)

// ownedTree returns the children helperOwner starts: two workers, the first with a grandchild in
// its group, whose lifeline is the test's descriptor 3, not the owner's: it outlives the owner.
func ownedTree() []*exec.Cmd {
	var cmds []*exec.Cmd
	for _, extra := range [][]string{{"-grandchild"}, nil} {
		cmd := exec.Command(os.Args[0], extra...)
		cmd.Env = append(os.Environ(), testproc.Env("worker"))
		cmd.Stdin = os.NewFile(3, "lifeline")
		cmds = append(cmds, cmd)
	}
	return cmds
}

// start starts a worker through o, with its stdin a pipe the test holds.
// It returns the worker's ready line's fields and its spawn tag (see helperWorker).
func start(t *testing.T, o *custody.Owner, opts custody.StartOptions, args ...string) (*custody.Child, []string, string) {
	t.Helper()
	cmd := testproc.Helper(t, "worker", args...)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	t.Cleanup(func() { in.Close() })
	c, err := o.Start(context.Background(), cmd, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Signal(os.Kill)
		c.Wait()
	})
	f, tg := readyFields(bufio.NewScanner(out))
	if f == nil {
		t.Fatalf("worker said no ready line: %v", c.Wait())
	}
	return c, f, tg
}

func TestStart(t *testing.T) {
	o := newOwner(t)
	c, _, tv := start(t, o, custody.StartOptions{Purpose: "gateway"})
	if pg, _ := syscall.Getpgid(c.ID.PID); pg != c.ID.PID {
		t.Errorf("child's process group %d, want its own (%d)", pg, c.ID.PID)
	}
	tg, err := tag.Parse(tv)
	self, _ := procid.Self()
	if err != nil || tg.Purpose != "gateway" || tg.SpawnerPID != self.PID {
		t.Errorf("child's tag %q (%v)", tv, err)
	}
	rows, err := o.Ledger.Rows(context.Background())
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	r := rows[0]
	kind, _, _ := scope.Containment()
	if r.Scope != string(kind) || r.Containment != kind.Containment() || (kind == scope.KindCgroup) != (r.Cgroup != "" && r.CgroupID != nil) {
		t.Errorf("row's scope %q containment %q cgroup %q; want %s", r.Scope, r.Containment, r.Cgroup, kind)
	}
	if r.PID != c.ID.PID || r.PGID == nil || *r.PGID != c.ID.PID || r.Reapable == nil || !*r.Reapable ||
		r.Owner == nil || *r.Owner != self.PID || r.SpawnerPID == nil || *r.SpawnerPID != self.PID {
		t.Errorf("row %+v", r)
	}
	// The child's pidfs id from the pidfd Go took at spawn, the owner's from one on itself.
	if id, err := procid.HandleID(custody.ChildProcess(c)); err == nil && (r.PidfdID == nil || *r.PidfdID != id ||
		r.SpawnerPidfdID == nil || *r.SpawnerPidfdID != self.PidfdID || self.PidfdID == 0) {
		t.Errorf("row's pidfs ids %v, %v; want the spawn handle's %d and the owner's %d", r.PidfdID, r.SpawnerPidfdID, id, self.PidfdID)
	} else if err != nil && procid.PidfsError() == nil {
		t.Errorf("HandleID: %v", err)
	}
	if o.Supervisor.PID() == 0 {
		t.Errorf("no supervisor runs")
	}
	res := c.Stop(context.Background(), stop.Options{Grace: time.Second})
	if res.Outcome != stop.Exited || res.Forced {
		t.Errorf("stop: %+v", res)
	}
	if rows, _ := o.Ledger.Rows(context.Background()); len(rows) != 0 {
		t.Errorf("row left after stop: %v", rows)
	}
}

// TestOwnerKilled: three generations; the test SIGKILLs the owner, and every covered process is
// gone within the grace plus a second, as is the supervisor.
func TestOwnerKilled(t *testing.T) { ownerKilled(t, nil) }

// ownerKilled runs TestOwnerKilled; before the owner's death, killSupervisor (when not nil) is
// given the owner's supervisor, and the one that replaced it each time it returns true.
func ownerKilled(t *testing.T, killSupervisor func(sup procid.ID, owner *testproc.Proc) (procid.ID, bool)) {
	led := ledgerPath(t)
	cmd := testproc.Helper(t, "owner", led)
	// The workers' lifeline is a pipe the test holds until it ends: the owner's stdin closes
	// when the test reaps the owner, which would end them without proving anything.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{r}
	t.Cleanup(func() { w.Close() })
	owner := testproc.Start(t, cmd)
	r.Close()
	ids := testid.Parse(t, owner.Expect("ready ", 20*time.Second))
	sup := incarnation(t, atoi(owner.Expect("supervisor ", 20*time.Second)[0]))
	if len(ids) != 3 {
		t.Fatalf("owner reported %v", ids)
	}
	for more := killSupervisor != nil; more; {
		sup, more = killSupervisor(sup, owner)
	}
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	testproc.WaitFor(t, 5*time.Second, func() error { // grace 1s; a loaded machine takes longer
		for _, id := range append(ids, sup) {
			if err := id.Verify(); err == nil {
				return fmt.Errorf("%v still runs", id)
			}
		}
		return nil
	})
}

// incarnation reads the incarnation of a process the test's helpers started, failing the test if
// it is gone already.
func incarnation(t *testing.T, pid int) procid.ID {
	t.Helper()
	inc, err := procid.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return inc.ID
}

// TestSlotBarrier: a generation that takes longer to exit than the stop deadline fences the slot;
// the next starts only after its exit is observed, and a probe sampling throughout never sees
// two generations alive.
func TestSlotBarrier(t *testing.T) {
	o := newOwner(t)
	slot := &custody.Slot{Owner: o, Purpose: "serve", Stop: stop.Options{Grace: 10 * time.Second}}
	var ready *bufio.Scanner
	worker := func(args ...string) *exec.Cmd {
		cmd := testproc.Helper(t, "worker", args...)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		ready = bufio.NewScanner(out)
		t.Cleanup(func() { in.Close() })
		return cmd
	}
	ctx := context.Background()
	g1, err := slot.Replace(ctx, worker("-slow"))
	if err != nil {
		t.Fatal(err)
	}
	readyFields(ready) // its SIGTERM handler is in place
	var gen2 atomic.Pointer[procid.ID]
	var both atomic.Bool
	stopProbe := make(chan struct{})
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		for {
			select {
			case <-stopProbe:
				return
			default:
			}
			if id := gen2.Load(); id != nil && live(*id) && live(g1.ID) {
				both.Store(true)
			}
		}
	}()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = slot.Replace(short, worker())
	cancel()
	var fe *custody.FencedError
	if !errors.As(err, &fe) || fe.Result.Outcome != stop.TimedOut || fe.Generation != 1 {
		t.Fatalf("Replace with a short deadline = %v; want fenced by generation 1, timed out", err)
	}
	var g2 *custody.Child
	testproc.WaitFor(t, 10*time.Second, func() error {
		c, err := slot.Replace(ctx, worker())
		if err == nil {
			g2 = c
			gen2.Store(&c.ID)
		}
		return err
	})
	close(stopProbe)
	<-probeDone
	if both.Load() {
		t.Errorf("the probe saw generations 1 and 2 alive at once")
	}
	if live(g1.ID) {
		t.Errorf("generation 1 lives on")
	}
	if _, n := slot.Current(); n != 2 || !live(g2.ID) {
		t.Errorf("current generation %d", n)
	}
	g2.Stop(ctx, stop.Options{})
}

// live reports whether pid names a process that has not exited (zombies have).
// live reports whether the incarnation runs: its PID names it still, not a process that reused it.
func live(id procid.ID) bool { return id.Verify() == nil }

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestZeroSlot: the zero Slot starts and stops generations through a zero Owner of its own, and
// stopping needs nothing but package custody.
func TestZeroSlot(t *testing.T) {
	t.Setenv("CUSTODY_LEDGER", ledgerPath(t)) // the zero Owner's default ledger, kept in the test
	var slot custody.Slot
	cmd := testproc.Helper(t, "worker")
	in, _ := cmd.StdinPipe()
	t.Cleanup(func() { in.Close() })
	c, err := slot.Replace(context.Background(), cmd)
	if err != nil {
		t.Fatalf("Replace on a zero Slot: %v", err)
	}
	t.Cleanup(func() { slot.Owner.Supervisor.Close() })
	if cur, gen := slot.Current(); cur != c || gen != 1 {
		t.Errorf("Current() = %p, %d; want the child, generation 1", cur, gen)
	}
	var res custody.StopResult = c.Stop(context.Background(), custody.StopOptions{Grace: time.Second})
	if res.Outcome != custody.Exited && res.Outcome != custody.AlreadyExited {
		t.Errorf("stop: %+v", res)
	}
}
