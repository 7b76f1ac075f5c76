//go:build linux || darwin

package supervise_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

// startOwner starts an owner helper (see helperOwner) in its own process group, handing it the
// lifeline for its children.
func startOwner(t testing.TB, lifeline *os.File, args ...string) *helperProc {
	t.Helper()
	return startHelper(t, "owner", args, helperOpts{setpgid: true, extra: []*os.File{lifeline}, stdout: true})
}

// TestOwnerKilled is the three-generation test: the test starts an owner, the owner covers its
// children (one with a grandchild in its group, one that ignores SIGTERM) through the Client, and
// the test SIGKILLs the owner. Every covered process must be gone within grace + 1 s, the
// supervisor must have exited, and no zombie may be left.
func TestOwnerKilled(t *testing.T) {
	requireCapability(t, "subreaper", reaperErr)
	const grace = time.Second
	life := newLifeline(t)
	o := startOwner(t, life, "-grace", grace.String())
	var ids []procid.ID
	ids = append(ids, readyIDs(t, o.call("spawn child 1 -grandchild"))...)
	ids = append(ids, readyIDs(t, o.call("spawn child 1"))...)
	ids = append(ids, readyIDs(t, o.call("spawn child 1 -ignore-term"))...)
	sup := supID(t, o.call("sup"))
	if len(ids) != 4 {
		t.Fatalf("got %d ready processes, want 4: %v", len(ids), ids)
	}
	start := time.Now()
	o.cmd.Process.Kill()
	o.wait(5 * time.Second)
	testproc.WaitFor(t, grace+time.Second, func() error { return allGone(ids...) })
	t.Logf("covered processes gone %v after the owner's SIGKILL", time.Since(start))
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(sup) })
	settle(t, append(ids, sup)...)
}

// TestSupervisorKilled: the owner restarts a killed supervisor and replays the covered set, so
// the owner's later death still reaches every group.
func TestSupervisorKilled(t *testing.T) {
	requireCapability(t, "subreaper", reaperErr)
	const grace = time.Second
	life := newLifeline(t)
	o := startOwner(t, life, "-grace", grace.String())
	ids := readyIDs(t, o.call("spawn child 3"))
	s1 := supID(t, o.call("sup"))
	if err := s1.Verify(); err != nil {
		t.Fatal(err)
	}
	// A test's kill by PID, right after proving the incarnation: the owner holds the handle.
	if err := syscall.Kill(s1.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s2 := supID(t, o.call(fmt.Sprintf("waitsup %d", s1.PID)))
	if s2 == s1 {
		t.Fatalf("supervisor %v was not replaced", s1)
	}
	// The owner's waiter reaped the dead supervisor: no zombie while the owner lives.
	testproc.WaitFor(t, 5*time.Second, func() error {
		if present(s1) {
			return fmt.Errorf("killed supervisor %v still present (zombie: %v)", s1, zombie(s1))
		}
		return nil
	})
	if got := o.call("err"); len(got) != 1 || got[0] != "err <nil>" {
		t.Fatalf("client error after one restart: %q", got)
	}
	o.cmd.Process.Kill()
	o.wait(5 * time.Second)
	testproc.WaitFor(t, grace+time.Second, func() error { return allGone(ids...) })
	settle(t, append(ids, s2)...)
}

// TestCleanExit: an owner that stops its children itself and unregisters them leaves a supervisor
// with nothing covered, which it releases after the idle grace: the EOF kills nothing, not even a
// child that was unregistered but left running.
func TestCleanExit(t *testing.T) {
	life := newLifeline(t)
	o := startOwner(t, life, "-idle", "300ms")
	ids := readyIDs(t, o.call("spawn child 2"))
	a, b := ids[0], ids[1]
	s1 := supID(t, o.call("sup"))
	o.call(fmt.Sprintf("stop %d", a.PID))
	o.call(fmt.Sprintf("unregister %d", b.PID))
	o.call("supgone")
	testproc.WaitFor(t, 5*time.Second, func() error {
		if present(s1) {
			return fmt.Errorf("idle supervisor %v still present (zombie: %v)", s1, zombie(s1))
		}
		return nil
	})
	if !alive(b) {
		t.Fatalf("the idle supervisor's EOF killed unregistered %v", b)
	}
	// The next registration starts a supervisor again.
	c := readyIDs(t, o.call("spawn child 1"))[0]
	s2 := supID(t, o.call("sup"))
	if s2 == s1 {
		t.Fatalf("no new supervisor after the idle release")
	}
	o.call(fmt.Sprintf("stop %d", c.PID))
	o.call("close")
	if present(s2) {
		t.Errorf("supervisor %v still present after Close", s2)
	}
	if !alive(b) {
		t.Fatalf("Close with nothing covered killed unregistered %v", b)
	}
	o.call(fmt.Sprintf("stop %d", b.PID))
	o.stdin.Close()
	if err := o.wait(10 * time.Second); err != nil {
		t.Fatalf("owner: %v", err)
	}
	if err := allGone(a, b, c); err != nil {
		t.Fatal(err)
	}
}

// TestForeignOwner: a shell script is the owner. It starts the supervisor (this binary, with
// $CUSTODY_SUPERVISOR=1), writes legacy `register <pgid>` lines to it, starts children in their
// own process groups (set -m), and is SIGKILLed: its children die.
func TestForeignOwner(t *testing.T) {
	requireCapability(t, "subreaper", reaperErr)
	bash, err := exec.LookPath("bash")
	requireCapability(t, "bash", err)
	_, err = exec.LookPath("mkfifo")
	requireCapability(t, "mkfifo", err)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const script = `
set -e
set -m # job control: every background job gets its own process group
dir=$(mktemp -d)
mkfifo "$dir/sup"
CUSTODY_SUPERVISOR=1 CUSTODY_SUPERVISOR_GRACE=1s CUSTODY_SUPERVISOR_OWNER_PGID=$$ "$BIN" <"$dir/sup" 3<&- &
sup=$!
exec 4>"$dir/sup" # the only write end: children must not inherit it
rm -r "$dir"
echo "sup $sup"
for i in 1 2; do
	env "$HELPER" "$BIN" <&3 4>&- & # $! is BIN's pid: env execs it
	echo "register $!" >&4
done
echo registered
wait
`
	life := newLifeline(t)
	sh := startProcess(t, "bash", bash, []string{"-c", script},
		helperOpts{setpgid: true, extra: []*os.File{life}, stdout: true, env: []string{"BIN=" + exe, "HELPER=" + testproc.Env("child")}})
	var lines []string
	for len(lines) < 4 {
		lines = append(lines, sh.line(10*time.Second))
	}
	ids := readyIDs(t, lines)
	var sup procid.ID
	for _, l := range lines {
		var pid int
		if _, err := fmt.Sscanf(l, "sup %d", &pid); err == nil {
			inc, err := procid.Read(pid)
			if err != nil {
				t.Fatalf("supervisor %d: %v", pid, err)
			}
			sup = inc.ID
		}
	}
	if len(ids) != 2 || sup.PID == 0 || !strings.Contains(strings.Join(lines, "\n"), "registered") {
		t.Fatalf("unexpected script output %q", lines)
	}
	sh.cmd.Process.Kill()
	sh.wait(5 * time.Second)
	testproc.WaitFor(t, 2*time.Second, func() error { return allGone(ids...) })
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(sup) })
	settle(t, append(ids, sup)...)
}

// TestClientYoungDeaths: a supervisor that dies right after its start is restarted with a
// growing wait, never in a tight loop, and never given up on; the client reports the loss once,
// and coverage comes back at the first supervisor that lives.
func TestClientYoungDeaths(t *testing.T) {
	life := newLifeline(t)
	g := startGroup(t, life)
	starts := filepath.Join(t.TempDir(), "starts")
	testproc.Setenv(t, "die-young")
	t.Setenv("DIE_YOUNG_LOG", starts)
	exe, _ := os.Executable()
	var mu sync.Mutex
	var notes []error
	c := &supervise.Client{Command: []string{exe}, Notify: func(err error) {
		mu.Lock()
		notes = append(notes, err)
		mu.Unlock()
	}}
	defer c.Close()
	begin := time.Now()
	if err := c.Register(supervise.Group{PGID: g.pgid(), Start: g.leader().Start}); err != nil {
		t.Logf("register: %v", err) // the first supervisor may die before the replay is written
	}
	count := func() int { b, _ := os.ReadFile(starts); return strings.Count(string(b), "\n") }
	testproc.WaitFor(t, 20*time.Second, func() error {
		if n := count(); n < 5 {
			return fmt.Errorf("%d starts", n)
		}
		return nil
	})
	// Four waits after young deaths, 100 ms doubling: at least 1.5 s, however loaded the machine.
	if d := time.Since(begin); d < 1500*time.Millisecond {
		t.Errorf("5 starts within %v: restarted without the growing wait", d)
	}
	// Each supervisor covers the set from its replay to its death: losses and recoveries alternate.
	alternate := func() error {
		mu.Lock()
		defer mu.Unlock()
		for i, err := range notes {
			if (i%2 == 0) != (err != nil) {
				return fmt.Errorf("notified %v: not a loss, then nil, in turn", notes)
			}
		}
		if len(notes) < 7 {
			return fmt.Errorf("notified %v: want a loss at every death", notes)
		}
		return nil
	}
	testproc.WaitFor(t, 5*time.Second, alternate)
	// A supervisor that lives ends the loss.
	testproc.Setenv(t, "supervise-cli")
	testproc.WaitFor(t, 20*time.Second, func() error {
		if err := c.Err(); err != nil {
			return err
		}
		return nil
	})
	testproc.WaitFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(notes)%2 != 0 {
			return fmt.Errorf("notified %v: the last loss never ended", notes)
		}
		return nil
	})
	if err := alternate(); err != nil {
		t.Error(err)
	}
}

// TestClientCommand runs the supervisor as a command (as the CLI's `custody supervise --owner-pgid
// P --grace D`), and checks Close: groups still registered are stopped, unregistered ones are not.
func TestClientCommand(t *testing.T) {
	life := newLifeline(t)
	covered, released := startGroup(t, life), startGroup(t, life)
	testproc.Setenv(t, "supervise-cli")
	exe, _ := os.Executable()
	c := &supervise.Client{Command: []string{exe}, Grace: time.Second}
	for _, g := range []group{covered, released} {
		if err := c.Register(supervise.Group{PID: g.pgid(), PGID: g.pgid(), Start: g.leader().Start}); err != nil {
			t.Fatal(err)
		}
	}
	inc, err := procid.Read(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unregister(released.pgid()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if present(inc.ID) {
		t.Errorf("supervisor %v present after Close", inc.ID)
	}
	if err := covered.h.wait(5 * time.Second); err == nil {
		t.Errorf("covered group exited cleanly; want stopped by Close")
	}
	if !alive(released.leader()) {
		t.Errorf("unregistered group was stopped")
	}
	if err := c.Register(supervise.Group{PGID: released.pgid(), Start: released.leader().Start}); !errors.Is(err, supervise.ErrClosed) {
		t.Errorf("Register after Close: %v, want ErrClosed", err)
	}
}

func TestClientStartFailures(t *testing.T) {
	life := newLifeline(t)
	g := startGroup(t, life)
	for _, tc := range []struct {
		name    string
		command []string
		want    string
	}{
		{"never ready", []string{"sh", "-c", "exec sleep 30"}, "not ready after"},
		{"exits at once", []string{"sh", "-c", "exit 0"}, "exited before it was ready"},
		{"missing", []string{filepath.Join(t.TempDir(), "no-such-supervisor")}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &supervise.Client{Command: tc.command, StartTimeout: 300 * time.Millisecond}
			defer c.Close()
			err := c.Register(supervise.Group{PGID: g.pgid(), Start: g.leader().Start})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Register: %v, want an error containing %q", err, tc.want)
			}
			if c.Err() != nil || c.PID() != 0 {
				t.Errorf("after a failed start: Err() = %v, PID() = %d", c.Err(), c.PID())
			}
		})
	}
}

func TestClientNoInit(t *testing.T) {
	life := newLifeline(t)
	g := startGroup(t, life)
	t.Setenv(supervise.EnvSupervisor, "1") // as if this were a re-executed copy that skipped Init
	c := &supervise.Client{}
	defer c.Close()
	if err := c.Register(supervise.Group{PGID: g.pgid(), Start: g.leader().Start}); !errors.Is(err, supervise.ErrNoInit) {
		t.Fatalf("Register: %v, want ErrNoInit", err)
	}
}

// TestClientNoInitInMain: a program whose main did not call Init gets ErrNoInit at its first
// registration, before any copy of it is started: the copy would run main again.
func TestClientNoInitInMain(t *testing.T) {
	life := newLifeline(t)
	g := startGroup(t, life)
	supervise.ForgetInit(t)
	c := &supervise.Client{}
	defer c.Close()
	err := c.Register(supervise.Group{PGID: g.pgid(), Start: g.leader().Start})
	if !errors.Is(err, supervise.ErrNoInit) || !strings.Contains(err.Error(), "custody.Init") {
		t.Fatalf("Register: %v, want ErrNoInit naming custody.Init", err)
	}
	if c.PID() != 0 {
		t.Errorf("a supervisor was started: pid %d", c.PID())
	}
}

func TestClientRefuses(t *testing.T) {
	c := &supervise.Client{}
	defer c.Close()
	for _, g := range []supervise.Group{
		{PGID: 0, Start: 9}, {PGID: 1, Start: 9}, {PGID: -5, Start: 9}, {PID: 7, PGID: 8, Start: 9},
		{PGID: syscall.Getpgrp(), Start: 9},
		{PGID: 4242}, // no proven identity: a replay would bind to whoever holds the PID then
	} {
		if err := c.Register(g); !errors.Is(err, supervise.ErrRefused) {
			t.Errorf("Register(%+v): %v, want ErrRefused", g, err)
		}
	}
	if c.PID() != 0 {
		t.Errorf("a refused registration started a supervisor")
	}
}

// A supervisor released as idle removes its nest socket and directory as it exits, which can be
// after the client has started the next one: the next one must stay reachable on its socket.
// The released supervisor is held stopped (SIGSTOP, by the PID of the client's own child, not yet
// reaped) until the next one runs, started by a registration.
func TestNestSocketAfterIdleRelease(t *testing.T) {
	t.Setenv(scope.EnvContainment, "process-group") // the nest serves the process-group path only
	c := &supervise.Client{Grace: time.Second, IdleGrace: 10 * time.Millisecond}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	old, err := procid.Read(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(old.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			syscall.Kill(old.PID, syscall.SIGCONT)
		}
	})
	testproc.WaitFor(t, 10*time.Second, func() error {
		if c.PID() != 0 {
			return errors.New("the supervisor, covering nothing, was not released")
		}
		return nil
	})
	// The next supervisor covers a group, so that it is not released as idle in turn.
	kid := startHelper(t, "child", nil, helperOpts{setpgid: true, stdout: true})
	k := readyIDs(t, []string{kid.line(20 * time.Second)})[0]
	if err := c.Register(supervise.Group{PGID: k.PID, Start: k.Start}); err != nil {
		t.Fatal(err)
	}
	path := c.NestSocket()
	syscall.Kill(old.PID, syscall.SIGCONT)
	stopped = false
	id := procid.ID{PID: old.PID, Start: old.Start}
	testproc.WaitFor(t, 10*time.Second, func() error {
		if id.Verify() == nil {
			return fmt.Errorf("the released supervisor %v still runs", id)
		}
		return nil
	})
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the running supervisor's nest socket, after the released one exited: %v", err)
	}
	conn.Close()
}

// TestReleaseIdle: ReleaseIdle leaves a supervisor that covers a group running; once the group
// is uncovered it releases it at once, tells the OnIdle hooks and returns before its exit, which
// follows (the supervisor sees its pipe's end with nothing to stop, and the group lives on).
func TestReleaseIdle(t *testing.T) {
	c := &supervise.Client{Grace: time.Second, IdleGrace: -1}
	t.Cleanup(func() { c.Close() })
	idle := make(chan struct{}, 1)
	c.OnIdle(func() { idle <- struct{}{} })
	kid := startHelper(t, "child", nil, helperOpts{setpgid: true, stdout: true})
	k := readyIDs(t, []string{kid.line(20 * time.Second)})[0]
	if err := c.Register(supervise.Group{PGID: k.PID, Start: k.Start}); err != nil {
		t.Fatal(err)
	}
	sup, err := procid.Read(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	c.ReleaseIdle()
	if c.PID() != sup.PID {
		t.Fatalf("ReleaseIdle with a group covered: supervisor %d, want %d still", c.PID(), sup.PID)
	}
	select {
	case <-idle:
		t.Fatal("ReleaseIdle with a group covered told the OnIdle hooks")
	default:
	}
	if err := c.Unregister(k.PID); err != nil {
		t.Fatal(err)
	}
	c.ReleaseIdle()
	if c.PID() != 0 {
		t.Fatalf("ReleaseIdle covering nothing: supervisor %d still the client's", c.PID())
	}
	select {
	case <-idle:
	default:
		t.Fatal("ReleaseIdle covering nothing did not tell the OnIdle hooks")
	}
	testproc.WaitFor(t, 10*time.Second, func() error {
		if sup.ID.Verify() == nil {
			return fmt.Errorf("the released supervisor %v still runs", sup.ID)
		}
		return nil
	})
	if err := k.Verify(); err != nil {
		t.Errorf("the group uncovered before the release: %v; want it alive", err)
	}
}

// TestReleaseWhenIdle: from the call on, the supervisor is released as soon as it covers nothing,
// without the IdleGrace (here: never), the hooks told; while a group is covered it stays. A new
// cover starts a new one, which is released likewise when uncovered; and with nothing covered
// the release is at once.
func TestReleaseWhenIdle(t *testing.T) {
	c := &supervise.Client{Grace: time.Second, IdleGrace: -1}
	t.Cleanup(func() { c.Close() })
	idle := make(chan struct{}, 4)
	c.OnIdle(func() { idle <- struct{}{} })
	kid := startHelper(t, "child", nil, helperOpts{setpgid: true, stdout: true})
	k := readyIDs(t, []string{kid.line(20 * time.Second)})[0]
	covered := func() procid.Incarnation {
		t.Helper()
		if err := c.Register(supervise.Group{PGID: k.PID, Start: k.Start}); err != nil {
			t.Fatal(err)
		}
		sup, err := procid.Read(c.PID())
		if err != nil {
			t.Fatal(err)
		}
		return sup
	}
	released := func(what string, sup procid.Incarnation) {
		t.Helper()
		if err := c.Unregister(k.PID); err != nil {
			t.Fatal(err)
		}
		testproc.WaitFor(t, 10*time.Second, func() error {
			if c.PID() != 0 {
				return fmt.Errorf("%s: supervisor %d still the client's after the uncover", what, c.PID())
			}
			return nil
		})
		select {
		case <-idle:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: released without telling the OnIdle hooks", what)
		}
		testproc.WaitFor(t, 10*time.Second, func() error {
			if sup.ID.Verify() == nil {
				return fmt.Errorf("%s: the released supervisor %v still runs", what, sup.ID)
			}
			return nil
		})
		if err := k.Verify(); err != nil {
			t.Fatalf("%s: the group uncovered before the release: %v; want it alive", what, err)
		}
	}
	sup := covered()
	c.ReleaseWhenIdle()
	if c.PID() != sup.PID {
		t.Fatalf("ReleaseWhenIdle with a group covered: supervisor %d, want %d still", c.PID(), sup.PID)
	}
	select {
	case <-idle:
		t.Fatal("ReleaseWhenIdle with a group covered told the OnIdle hooks")
	default:
	}
	released("first uncover", sup)
	again := covered()
	if again.ID == sup.ID {
		t.Fatalf("a cover after the release: supervisor %v, want a new one", again.ID)
	}
	released("second uncover", again)
	// Another client's supervisor, covering nothing, is released by the call itself.
	other := &supervise.Client{Grace: time.Second, IdleGrace: -1}
	t.Cleanup(func() { other.Close() })
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	idler, err := procid.Read(other.PID())
	if err != nil {
		t.Fatal(err)
	}
	other.ReleaseWhenIdle()
	if other.PID() != 0 {
		t.Fatalf("ReleaseWhenIdle covering nothing: supervisor %d still the client's", other.PID())
	}
	testproc.WaitFor(t, 10*time.Second, func() error {
		if idler.ID.Verify() == nil {
			return fmt.Errorf("the idle supervisor %v still runs", idler.ID)
		}
		return nil
	})
}
