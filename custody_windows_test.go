package custody_test

// The owned start on Windows, against real processes under a real job object: the test binary
// re-executes itself as the helpers below. API facts the assertions rest on:
//
//	TerminateJobObject(job, 1)   every process in the job exits with code 1; Windows has no
//	                             SIGTERM, so a stop is always forced
//	closing the last job handle  KILL_ON_JOB_CLOSE: the kernel kills the job, also when the handle
//	                             closes because its owner was terminated
//	GetProcessTimes              creation and exit FILETIMEs at clock-tick resolution, readable
//	                             through a handle after the exit: the kernel's own record of order

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/tag"
)

// ownedTree returns the child helperOwner starts: a held child with a leaf (see helperHeld).
// Neither reads a lifeline, so only their job can end them when the test kills the owner: Wine
// ends a pipe whose writer lives when the reader's parent dies, and a child reading one would
// exit by itself and prove nothing.
func ownedTree() []*exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testproc.Env("held"))
	return []*exec.Cmd{cmd}
}

// worker is a started worker: its stdout lines, and its stdin (the lifeline) held by the test.
type worker struct {
	lines <-chan string
	stdin io.Closer
}

// workerCmd returns an unstarted worker whose stdout the returned worker reads once started.
// Cleanup closes its lifeline.
func workerCmd(t *testing.T, args ...string) (*exec.Cmd, *worker) {
	t.Helper()
	cmd := testproc.Helper(t, "worker", args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	lines := make(chan string, 16)
	w := &worker{lines: lines, stdin: in}
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, w
}

// owned starts cmd through o. Cleanup stops the child, if a test left it running.
func owned(t *testing.T, o *custody.Owner, cmd *exec.Cmd, opts custody.StartOptions) *custody.Child {
	t.Helper()
	c, err := o.Start(context.Background(), cmd, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupChild(t, c) })
	return c
}

// cleanupChild stops what a test left of c. A released child has nothing left: its stop finds
// its job closed.
func cleanupChild(t *testing.T, c *custody.Child) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case <-c.Done():
		if err := c.Release(ctx); err == nil {
			return
		}
	default:
	}
	if res := c.Stop(ctx, stop.Options{}); !res.OK() {
		t.Logf("cleanup: stop pid %d: %+v", c.ID.PID, res)
	}
}

// expect returns the fields after prefix on the next line that has it.
func (w *worker) expect(t *testing.T, prefix string) []string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				t.Fatalf("worker's stdout closed while waiting for %q", prefix)
			}
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.Fields(rest)
			}
			t.Logf("worker: %s", l)
		case <-timeout:
			t.Fatalf("no %q line from the worker within 30s", prefix)
		}
	}
}

// ready reads a worker's tag line and its ready line: the incarnations it reports, its own first.
func (w *worker) ready(t *testing.T) (string, []procid.ID) {
	t.Helper()
	tg := strings.Join(w.expect(t, "tag"), "")
	return tg, testid.Parse(t, w.expect(t, "ready "))
}

func mustRows(t *testing.T, o *custody.Owner, n int) []ledger.Row {
	t.Helper()
	rows, err := o.Ledger.Rows(context.Background())
	if err != nil || len(rows) != n {
		t.Fatalf("ledger rows %+v, %v; want %d", rows, err, n)
	}
	return rows
}

// TestStartStop: a child started through an Owner runs in a job with its grandchild, carries the
// spawn tag, is recorded with scope "job" and its exact start, and a stop kills its whole job
// (forced: Windows has no SIGTERM) and drops its row.
func TestStartStop(t *testing.T) {
	o := newOwner(t)
	cmd, w := workerCmd(t, "-grandchild")
	c := owned(t, o, cmd, custody.StartOptions{Purpose: "gateway"})
	tagValue, ids := w.ready(t)
	child, grand := ids[0], ids[1]
	if c.ID != child {
		t.Fatalf("Child.ID = %v, the child reports %v", c.ID, child)
	}
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}

	tg, err := tag.Parse(tagValue)
	if err != nil {
		t.Fatalf("the child's %s = %q: %v", tag.DefaultEnv, tagValue, err)
	}
	if tg.Purpose != "gateway" || tg.SpawnerPID != self.PID || tg.Install != o.Install ||
		tg.SpawnerCreate == nil || math.Abs(*tg.SpawnerCreate-self.CreateTime) > 0.001 {
		t.Errorf("the child's tag %+v; want purpose gateway, spawner %d created %.3f, install %s",
			tg, self.PID, self.CreateTime, o.Install)
	}

	r := mustRows(t, o, 1)[0]
	if r.PID != child.PID || r.Scope != "job" || r.PGID != nil || r.StartTicks == nil || *r.StartTicks != child.Start ||
		r.Purpose != "gateway" || r.Install != o.Install || r.Reapable == nil || !*r.Reapable || r.Generation != nil ||
		r.Owner == nil || *r.Owner != self.PID || r.SpawnerPID == nil || *r.SpawnerPID != self.PID {
		t.Errorf("row %+v", r)
	}
	if state, proof := r.Record().Check(true); state != procid.Alive || proof != procid.ExactProof {
		t.Errorf("the row's record checks %v, %v; want alive by exact proof", state, proof)
	}
	if err := grand.Verify(); err != nil {
		t.Fatalf("grandchild: %v", err)
	}

	res := c.Stop(context.Background(), stop.Options{Grace: time.Second})
	// The worker is a console program without a window: only Ctrl+Break could ask it to exit, and
	// only from an owner on its console. Without one (as under Wine, where the test has none), the
	// stop kills at once and says why.
	if res.Outcome != stop.Exited || res.PID != child.PID || res.Request == "" && (!res.Forced || res.Reason == "") {
		t.Errorf("stop = %+v; want exited, and forced with a reason when nothing asked", res)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Stop returned before the child was reaped")
	}
	if err := c.Wait(); res.Forced && exitCode(err) != 1 {
		t.Errorf("the child ended with %v; want exit code 1 from TerminateJobObject", err)
	}
	// Stop reports exited only once the job is empty: no polling here.
	for _, id := range ids {
		if err := gone(id); err != nil {
			t.Errorf("after the stop: %v", err)
		}
	}
	mustRows(t, o, 0)
}

// TestStopExited: a child that exited by itself is stopped without a signal, and released.
func TestStopExited(t *testing.T) {
	o := newOwner(t)
	cmd, _ := workerCmd(t, "-exit", "3")
	c := owned(t, o, cmd, custody.StartOptions{})
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not exit")
	}
	if err := c.Wait(); exitCode(err) != 3 {
		t.Fatalf("the worker ended with %v; want exit code 3", err)
	}
	res := c.Stop(context.Background(), stop.Options{})
	if res.Outcome != stop.AlreadyExited || res.Forced {
		t.Errorf("stop of an exited child = %+v; want already-exited, not forced", res)
	}
	mustRows(t, o, 0)
}

// TestOwnerKilled: three generations. The test terminates the owner (TerminateProcess, which
// runs none of its code); the kernel closes its job handle, and the child and its leaf, which
// nothing else would end (they sleep for an hour), die with it.
func TestOwnerKilled(t *testing.T) {
	led := filepath.Join(testproc.TempDir(t), "spawn-ledger.json")
	testproc.Use("held") // the owner starts it
	cmd := testproc.Helper(t, "owner", led)
	cmd.WaitDelay = 10 * time.Second // a survivor would hold the owner's stderr open
	owner := testproc.Start(t, cmd)
	ids := testid.Parse(t, owner.Expect("ready ", 30*time.Second))
	for _, id := range ids {
		if err := id.Verify(); err != nil {
			t.Fatalf("before the owner's death: %v", err)
		}
	}
	rows, err := ledger.Open(led).Rows(context.Background())
	if err != nil || len(rows) != 1 || rows[0].PID != ids[0].PID || rows[0].Scope != "job" ||
		rows[0].Owner == nil || *rows[0].Owner != owner.Process.Pid {
		t.Fatalf("the owner's ledger: %+v, %v", rows, err)
	}

	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	owner.Wait()
	testproc.WaitFor(t, 10*time.Second, func() error {
		for _, id := range ids {
			if err := gone(id); err != nil {
				return fmt.Errorf("after the owner's death: %w", err)
			}
		}
		return nil
	})
	// The owner's row is the orphan set now, and provably dead.
	if state, _ := rows[0].Record().Check(true); state != procid.Dead {
		t.Errorf("the dead owner's row checks %v, want dead", state)
	}
}

// TestSlotReplace: each Replace stops the running generation, its whole job, before the next one
// starts. The kernel's own clock shows it: generation 2 was created no earlier than generation 1
// and its grandchild exited.
func TestSlotReplace(t *testing.T) {
	o := newOwner(t)
	slot := &custody.Slot{Owner: o, Purpose: "serve"}
	ctx := context.Background()

	cmd1, w1 := workerCmd(t, "-grandchild")
	g1, err := slot.Replace(ctx, cmd1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupChild(t, g1) })
	_, ids1 := w1.ready(t)
	if r := mustRows(t, o, 1)[0]; r.PID != g1.ID.PID || r.Generation == nil || *r.Generation != 1 {
		t.Fatalf("generation 1's row %+v", r)
	}
	handles := make([]windows.Handle, len(ids1))
	for i, id := range ids1 {
		handles[i] = openProven(t, id)
	}

	cmd2, w2 := workerCmd(t)
	g2, err := slot.Replace(ctx, cmd2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupChild(t, g2) })
	select {
	case <-g1.Done():
	default:
		t.Fatal("generation 1 was not reaped when Replace returned")
	}
	for _, id := range ids1 {
		if err := gone(id); err != nil {
			t.Errorf("generation 1 when Replace returned: %v", err)
		}
	}
	for i, h := range handles {
		if exit := exitTime(t, h); g2.ID.Start < exit {
			t.Errorf("generation 2 created at %d, before %v of generation 1 exited at %d", g2.ID.Start, ids1[i], exit)
		}
	}
	_, ids2 := w2.ready(t)
	if ids2[0] != g2.ID {
		t.Fatalf("generation 2 reports %v, Child.ID is %v", ids2[0], g2.ID)
	}
	if cur, n := slot.Current(); cur != g2 || n != 2 {
		t.Errorf("Current() = %p, %d; want generation 2 (%p)", cur, n, g2)
	}
	if r := mustRows(t, o, 1)[0]; r.PID != g2.ID.PID || r.Generation == nil || *r.Generation != 2 {
		t.Errorf("after Replace, row %+v; want generation 2's only", r)
	}
	if res := g2.Stop(ctx, stop.Options{}); res.Outcome != stop.Exited {
		t.Errorf("stop of generation 2 = %+v", res)
	}
	mustRows(t, o, 0)
}

// openProven opens a process the test did not start, proves it is id, and keeps it open (and so
// its exit time readable) until cleanup.
func openProven(t *testing.T, id procid.ID) windows.Handle {
	t.Helper()
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(id.PID))
	if err != nil {
		t.Fatalf("OpenProcess(%d): %v", id.PID, err)
	}
	t.Cleanup(func() { windows.CloseHandle(h) })
	created, _ := processTimes(t, h)
	if created != id.Start {
		t.Fatalf("pid %d created at %d, reported %v", id.PID, created, id)
	}
	return h
}

// exitTime returns the exit FILETIME of the exited process h.
func exitTime(t *testing.T, h windows.Handle) uint64 {
	t.Helper()
	_, exit := processTimes(t, h)
	if exit == 0 {
		t.Fatal("GetProcessTimes reports no exit time")
	}
	return exit
}

func processTimes(t *testing.T, h windows.Handle) (created, exit uint64) {
	t.Helper()
	var c, e, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &c, &e, &kernel, &user); err != nil {
		t.Fatalf("GetProcessTimes: %v", err)
	}
	return uint64(c.HighDateTime)<<32 | uint64(c.LowDateTime), uint64(e.HighDateTime)<<32 | uint64(e.LowDateTime)
}

// gone reports, with a nil error, that the incarnation id has exited: procid reads its PID as
// gone, or as a later process that reused it.
func gone(id procid.ID) error {
	err := id.Verify()
	if errors.Is(err, procid.ErrGone) || errors.Is(err, procid.ErrReused) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%v still runs", id)
	}
	return fmt.Errorf("%v: %w", id, err)
}

// exitCode is the exit code a started child's Wait reports: 0 for nil, -1 for an error that
// carries none.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode()
	}
	return -1
}
