//go:build linux || darwin

package custody_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

// startHanded starts a handed-worker through o (a grandchild in its group, an escapee in a
// session of its own) with its stdin a pipe the test holds, and returns the child and the three
// processes' incarnations.
func startHanded(t *testing.T, o *custody.Owner) (*custody.Child, []procid.ID) {
	t.Helper()
	cmd := testproc.Helper(t, "handed-worker")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	t.Cleanup(func() { in.Close() }) // the lifeline of all three
	c, err := o.Start(context.Background(), cmd, custody.StartOptions{Purpose: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Signal(os.Kill); c.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("handed-worker said nothing: %v", c.Wait())
	}
	f := strings.Fields(sc.Text())
	if len(f) != 4 || f[0] != "ready" {
		t.Fatalf("handed-worker said %q", sc.Text())
	}
	ids := []procid.ID{c.ID}
	for _, pid := range f[2:] {
		ids = append(ids, pidIncarnation(t, pid))
	}
	return c, ids
}

// openFDs counts the test process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/dev/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// rowsOwnedBy returns the rows of the ledger at path whose owner is pid.
func rowsOwnedBy(t *testing.T, path string, pid int) []ledger.Row {
	t.Helper()
	rows, err := ledger.Open(path).Rows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var own []ledger.Row
	for _, r := range rows {
		if r.Owner != nil && *r.Owner == pid {
			own = append(own, r)
		}
	}
	return own
}

// TestOwnerClose: an owner with two started children (one whose grandchild left its session)
// and one adopted child closes: every one is gone when Close returns (the escapee too, where
// the scope is a cgroup), their rows are dropped, the supervisor the owner started has exited,
// and the owner holds no descriptor more than before it started. Start and Adopt then fail with
// ErrClosed and start nothing, and a second Close returns nil. In the scopes this process gets
// (a cgroup where one is writable) and in process groups.
func TestOwnerClose(t *testing.T) {
	t.Run("default", ownerClose)
	t.Run("pgrp", func(t *testing.T) {
		t.Setenv(scope.EnvContainment, "process-group") // read at each start, inherited by the giver
		ownerClose(t)
	})
}

func ownerClose(t *testing.T) {
	env := newTransferEnv(t, false)
	g := startGiver(t, env) // before the count: its pipes are the test's
	warm := &custody.Owner{Ledger: ledger.Open(env.ledger)}
	if c, err := warm.Start(context.Background(), exec.Command("/bin/true"), custody.StartOptions{}); err != nil {
		t.Fatal(err)
	} else {
		c.Wait()
	}
	if err := warm.Close(); err != nil { // the runtime opens what it opens once (netpoll)
		t.Fatal(err)
	}
	before := openFDs(t)

	o := &custody.Owner{Ledger: ledger.Open(env.ledger), Stop: custody.StopOptions{Grace: time.Second}}
	_, a := startHanded(t, o)
	_, b := startHanded(t, o)
	adopted, err := o.Adopt(context.Background(), g.grant)
	if err != nil {
		t.Fatal(err)
	}
	if res := g.Expect("result ", 10*time.Second); res[0] != "transferred" {
		t.Fatalf("giver's result %v", res)
	}
	supPID := o.Supervisor.PID()
	if supPID == 0 {
		t.Fatal("no supervisor runs")
	}
	sup := pidIncarnation(t, strconv.Itoa(supPID))
	if n := len(rowsOwnedBy(t, env.ledger, os.Getpid())); n != 3 {
		t.Fatalf("%d rows owned before Close, want 3", n)
	}
	cgroup := scopeOf(t, env.ledger, a[0].PID) == "cgroup"

	if err := o.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close returns once every exit is proven: no polling.
	procs := []procid.ID{a[0], a[1], b[0], b[1], adopted.ID, g.grandchild, sup}
	if cgroup {
		procs = append(procs, a[2], b[2], g.escapee)
	}
	for _, id := range procs {
		if err := gone(id); err != nil {
			t.Errorf("after Close: %v", err)
		}
	}
	for _, r := range rowsOwnedBy(t, env.ledger, os.Getpid()) {
		t.Errorf("row of pid %d left after Close", r.PID)
	}
	select {
	case <-adopted.Done():
	default:
		t.Error("the adopted child is not done after Close")
	}
	if after := openFDs(t); after > before {
		t.Errorf("%d descriptors open after Close, %d before the owner started", after, before)
	}

	cmd := testproc.Helper(t, "worker")
	if _, err := o.Start(context.Background(), cmd, custody.StartOptions{}); !errors.Is(err, custody.ErrClosed) {
		t.Errorf("Start after Close: %v; want ErrClosed", err)
	}
	if cmd.Process != nil {
		t.Errorf("Start after Close started pid %d", cmd.Process.Pid)
	}
	if _, err := o.Adopt(context.Background(), g.grant); !errors.Is(err, custody.ErrClosed) {
		t.Errorf("Adopt after Close: %v; want ErrClosed", err)
	}
	if err := o.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := o.Supervisor.PID(); n != 0 {
		t.Errorf("a supervisor (pid %d) runs after Close", n)
	}
}

// TestOwnerCloseHandedAway: a child the owner handed to another owner survives the giver's
// Close, with its grandchild and its escapee, and stays the receiver's, which it dies with.
func TestOwnerCloseHandedAway(t *testing.T) {
	t.Run("default", ownerCloseHandedAway)
	t.Run("pgrp", func(t *testing.T) {
		t.Setenv(scope.EnvContainment, "process-group")
		ownerCloseHandedAway(t)
	})
}

func ownerCloseHandedAway(t *testing.T) {
	env := newTransferEnv(t, false)
	o := &custody.Owner{Ledger: ledger.Open(env.ledger), Stop: custody.StopOptions{Grace: time.Second}}
	c, ids := startHanded(t, o)
	kept, _ := startHanded(t, o)
	grant, err := c.Grant(custody.GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := testproc.Start(t, env.command(t, "receiver", env.ledger, grant.String()))
	if f := r.Expect("adopted ", 30*time.Second); f[0] != strconv.Itoa(c.ID.PID) {
		t.Fatalf("adopted %v, want pid %d", f, c.ID.PID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if res, err := grant.Wait(ctx); err != nil || res.Outcome != custody.Transferred {
		t.Fatalf("grant: %+v, %v", res, err)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := gone(kept.ID); err != nil {
		t.Errorf("the child the owner kept, after Close: %v", err)
	}
	mustAlive(t, "after the giver's Close, the handed child", ids...)
	if owner := ownerOf(t, env.ledger, c.ID.PID); owner != r.Process.Pid {
		t.Fatalf("row's owner %d after the giver's Close, want the receiver %d", owner, r.Process.Pid)
	}
	killAndWait(t, r)
	waitGone(t, "after the receiver's death, the child's group", ids[:2]...)
	if scopeOf(t, env.ledger, c.ID.PID) == "cgroup" {
		waitGone(t, "after the receiver's death, the escapee", ids[2])
	}
}

// TestOwnerCloseSupervisorOfCaller: a supervisor the caller set is the caller's: Close stops
// and releases the children and leaves it running, covering nothing.
func TestOwnerCloseSupervisorOfCaller(t *testing.T) {
	sup := &supervise.Client{Grace: time.Second, IdleGrace: -1} // kept while idle: its survival is the point
	t.Cleanup(func() { sup.Close() })
	o := &custody.Owner{Ledger: ledger.Open(ledgerPath(t)), Supervisor: sup}
	c, f, _ := start(t, o, custody.StartOptions{}, "-grandchild")
	grand := pidIncarnation(t, f[3])
	if err := o.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, id := range []procid.ID{c.ID, grand} {
		if err := gone(id); err != nil {
			t.Errorf("after Close: %v", err)
		}
	}
	if n, pid := sup.Covered(), sup.PID(); n != 0 || pid == 0 {
		t.Errorf("after Close the caller's supervisor covers %d (pid %d); want it running, covering nothing", n, pid)
	}
}

// TestOwnerCloseUnproven: a child whose stop Close cannot prove is named in Close's error, and
// custody of it ends as on the owner's death: when Close returns, its scope has been killed
// (its cgroup closed, or its group stopped by the supervisor Close closed), and its row stays for
// a later reap to prove its end.
func TestOwnerCloseUnproven(t *testing.T) {
	t.Run("default", ownerCloseUnproven)
	t.Run("pgrp", func(t *testing.T) {
		t.Setenv(scope.EnvContainment, "process-group")
		ownerCloseUnproven(t)
	})
}

func ownerCloseUnproven(t *testing.T) {
	led := ledgerPath(t)
	o := &custody.Owner{Ledger: ledger.Open(led)} // its own supervisor, which Close closes
	c, ids := startHanded(t, o)
	sup := pidIncarnation(t, strconv.Itoa(o.Supervisor.PID()))
	custody.FailCloseStops(t)
	err := o.Close()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d: timed-out", c.ID.PID)) {
		t.Fatalf("Close: %v; want the child's timed-out stop named", err)
	}
	procs := []procid.ID{ids[0], ids[1], sup}
	if scopeOf(t, led, c.ID.PID) == "cgroup" {
		procs = append(procs, ids[2])
	}
	for _, id := range procs {
		if err := gone(id); err != nil {
			t.Errorf("after Close: %v", err)
		}
	}
	if rows := rowsOwnedBy(t, led, os.Getpid()); len(rows) != 1 || rows[0].PID != c.ID.PID {
		t.Errorf("%d rows after Close; want the child's alone", len(rows))
	}
	if res := c.Stop(context.Background(), custody.StopOptions{}); res.Outcome != custody.AlreadyExited {
		t.Errorf("Stop after Close: %+v; want already-exited, nothing signalled", res)
	}
}
