//go:build linux || darwin

package supervise_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

// startSupervisor starts a supervisor process as `custody supervise` would run, its stdin a pipe
// from the test (the test is its owner), in its own session, and waits until it is ready.
func startSupervisor(t *testing.T, ownerPGID int, grace time.Duration) *helperProc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := startHelper(t, "supervise-cli", []string{"--owner-pgid", strconv.Itoa(ownerPGID), "--grace", grace.String()},
		helperOpts{setsid: true, extra: []*os.File{w}, env: []string{supervise.EnvReadyFD + "=3"}})
	w.Close()
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.Read(make([]byte, 1)); err != nil {
		t.Fatalf("supervisor not ready: %v", err)
	}
	return h
}

// group is a process group of helper children started by the test.
type group struct {
	h   *helperProc
	ids []procid.ID // the leader last
}

func (g group) pgid() int            { return g.h.cmd.Process.Pid }
func (g group) leader() procid.ID    { return g.ids[len(g.ids)-1] }
func (g group) members() []procid.ID { return g.ids[:len(g.ids)-1] }

// startGroup starts a child helper as the leader of a new process group, its stdin the lifeline.
func startGroup(t *testing.T, lifeline *os.File, args ...string) group {
	t.Helper()
	h := startHelper(t, "child", args, helperOpts{setpgid: true, stdin: lifeline, stdout: true})
	var lines []string
	for {
		l := h.line(10 * time.Second)
		lines = append(lines, l)
		if strings.HasPrefix(l, fmt.Sprintf("ready %d ", h.cmd.Process.Pid)) {
			break
		}
	}
	g := group{h: h, ids: readyIDs(t, lines)}
	t.Cleanup(func() {
		// Members outlive a killed leader (they are the point of some tests): reap them as
		// orphans once the lifeline's EOF, or the supervisor, has ended them.
		for _, id := range g.members() {
			reapOrphan(t, id)
		}
	})
	return g
}

// feed writes the protocol to the supervisor and closes its stdin: the EOF of an owner's death.
func feed(t *testing.T, sup *helperProc, text string) {
	t.Helper()
	if _, err := io.WriteString(sup.stdin, text); err != nil {
		t.Fatalf("feed supervisor: %v", err)
	}
	if err := sup.stdin.Close(); err != nil {
		t.Fatal(err)
	}
}

// exitsCleanly waits for the supervisor and checks that it exited 0 (not by its own signal).
func exitsCleanly(t *testing.T, sup *helperProc, within time.Duration) {
	t.Helper()
	if err := sup.wait(within); err != nil {
		t.Fatalf("supervisor: %v", err)
	}
}

func TestServeRefusesTargets(t *testing.T) {
	life := newLifeline(t)
	owners := startGroup(t, life) // stands for the owner's group
	victim := startGroup(t, life)
	sup := startSupervisor(t, owners.pgid(), 5*time.Second)
	self := sup.cmd.Process.Pid // a session leader: its own group
	var b strings.Builder
	for _, l := range []string{
		"register 0", "register 1", "register -1", "register -7", "register 1 1 unknown", "register 0 0 0",
		"unregister 0", "unregister -1",
		fmt.Sprintf("register %d", self),
		fmt.Sprintf("register %d %d unknown", self, self),
		fmt.Sprintf("register %d", owners.pgid()),
		fmt.Sprintf("register %d %d %d", owners.pgid(), owners.pgid(), owners.leader().Start),
		fmt.Sprintf("register %d", victim.pgid()),
	} {
		fmt.Fprintln(&b, l)
	}
	feed(t, sup, b.String())
	if err := victim.h.wait(5 * time.Second); err == nil {
		t.Errorf("valid group %d exited cleanly; want killed", victim.pgid())
	}
	exitsCleanly(t, sup, 10*time.Second) // a supervisor that signalled its own group dies by it
	if !alive(owners.leader()) {
		t.Errorf("the owner's group %d was signalled", owners.pgid())
	}
}

func TestServeIgnoresGarbage(t *testing.T) {
	life := newLifeline(t)
	a, b, c, d := startGroup(t, life), startGroup(t, life), startGroup(t, life), startGroup(t, life)
	A, B, C, D := a.pgid(), b.pgid(), c.pgid(), d.pgid()
	lines := []string{
		fmt.Sprintf("register %d", A),
		"", "   ", "hello", "register", "unregister", "register abc", "register 12 13",
		"register 1e3", "register 0x10", "register +5", "register 4294967297", "register -4294967297",
		"register 99999999999999999999999", "\x00\xff\xfe register", strings.Repeat("register ", 20),
		fmt.Sprintf("REGISTER %d", D), fmt.Sprintf("xx register %d", D), fmt.Sprintf("register %d extra", D),
		fmt.Sprintf("register %d %d", D, D), fmt.Sprintf("register %d %d %d %d", D, D, D, D),
		fmt.Sprintf("register %d %d 12abc", D, D), fmt.Sprintf("register %d %d -5", D, D),
		fmt.Sprintf("register %d+1", D), fmt.Sprintf("unregister %d %d", A, A),
		fmt.Sprintf("register\t%d %d  unknown\r", B, B), // tabs, double spaces and a CR are tolerated
		fmt.Sprintf("register %d", C),
		fmt.Sprintf("unregister %d", C),
	}
	sup := startSupervisor(t, 0, 5*time.Second)
	feed(t, sup, strings.Join(lines, "\n")+"\n")
	exitsCleanly(t, sup, 10*time.Second)
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(a.leader(), b.leader()) })
	for _, g := range []group{c, d} {
		if !alive(g.leader()) {
			t.Errorf("group %d was signalled", g.pgid())
		}
	}
}

func TestServeLongLine(t *testing.T) {
	life := newLifeline(t)
	keep, kill := startGroup(t, life), startGroup(t, life)
	sup := startSupervisor(t, 0, 5*time.Second)
	before, _ := peakRSS(sup.cmd.Process.Pid)
	// 10 MB without a newline, starting like a valid registration: discarded whole.
	long := fmt.Sprintf("register %d ", keep.pgid()) + strings.Repeat("9", 10<<20)
	if _, err := io.WriteString(sup.stdin, long); err != nil {
		t.Fatal(err)
	}
	// The pipe holds 64 KiB at most, so by now the supervisor has read all but that much.
	if after, err := peakRSS(sup.cmd.Process.Pid); err == nil && after-before > 1024 {
		t.Errorf("supervisor peak RSS grew by %d KiB reading a 10 MB line", after-before)
	}
	feed(t, sup, fmt.Sprintf("\nregister %d\n", kill.pgid()))
	exitsCleanly(t, sup, 10*time.Second)
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(kill.leader()) })
	if !alive(keep.leader()) {
		t.Errorf("group %d named in a discarded line was signalled", keep.pgid())
	}
}

func TestServeUnterminatedTail(t *testing.T) {
	life := newLifeline(t)
	kill, keep := startGroup(t, life), startGroup(t, life)
	sup := startSupervisor(t, 0, 5*time.Second)
	feed(t, sup, fmt.Sprintf("register %d\nregister %d", kill.pgid(), keep.pgid()))
	exitsCleanly(t, sup, 10*time.Second)
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(kill.leader()) })
	if !alive(keep.leader()) {
		t.Errorf("group %d named in an unterminated tail was signalled", keep.pgid())
	}
}

// TestServeReusedLeader registers a live group under a start its leader does not have: the leader
// PID then names another incarnation than the registered one, and the group must survive.
func TestServeReusedLeader(t *testing.T) {
	life := newLifeline(t)
	g, control := startGroup(t, life), startGroup(t, life)
	sup := startSupervisor(t, 0, 5*time.Second)
	feed(t, sup, fmt.Sprintf("register %d %d %d\nregister %d %d %d\n",
		g.pgid(), g.pgid(), g.leader().Start+1,
		control.pgid(), control.pgid(), control.leader().Start))
	exitsCleanly(t, sup, 10*time.Second)
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(control.leader()) })
	if !alive(g.leader()) {
		t.Errorf("group %d with another leader incarnation was signalled", g.pgid())
	}
}

// TestSweepChecksIdentityAtKillTime covers the check made before each signal: a group accepted
// under one leader whose PID names another process when the owner dies is not signalled.
func TestSweepChecksIdentityAtKillTime(t *testing.T) {
	life := newLifeline(t)
	g := startGroup(t, life)
	cfg := supervise.Config{Grace: 200 * time.Millisecond, Logger: supervise.DiscardLogger}
	supervise.SweepOne(cfg, g.pgid(), g.leader().Start+1)
	supervise.SweepOne(cfg, g.pgid(), 0) // no leader was alive at registration: this one is new
	if !alive(g.leader()) {
		t.Fatalf("group %d with another leader incarnation was signalled", g.pgid())
	}
	supervise.SweepOne(cfg, g.pgid(), g.leader().Start)
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(g.leader()) })
}

// TestServeLeaderGoneMembersLive: a group whose leader exited but whose members live is still
// the registered group (its id stays reserved), and is killed.
func TestServeLeaderGoneMembersLive(t *testing.T) {
	requireCapability(t, "subreaper", reaperErr)
	life := newLifeline(t)
	bound, legacy := startGroup(t, life, "-grandchild"), startGroup(t, life, "-grandchild")
	sup := startSupervisor(t, 0, 5*time.Second)
	if _, err := fmt.Fprintf(sup.stdin, "register %d %d %d\nregister %d\n",
		bound.pgid(), bound.pgid(), bound.leader().Start, legacy.pgid()); err != nil {
		t.Fatal(err)
	}
	// Kill both leaders through their handles and reap them: their PIDs now name no process.
	for _, g := range []group{bound, legacy} {
		g.h.cmd.Process.Kill()
		g.h.wait(5 * time.Second)
		if !alive(g.members()[0]) {
			t.Fatalf("member %v died with its leader", g.members()[0])
		}
	}
	feed(t, sup, "")
	// Reap the members as they die: a group of zombies still has members for kill(2), and
	// would keep the supervisor polling until its grace ends.
	settle(t, bound.members()[0], legacy.members()[0])
	exitsCleanly(t, sup, 10*time.Second)
}

func TestServeGrace(t *testing.T) {
	life := newLifeline(t)
	stubborn, polite := startGroup(t, life, "-ignore-term"), startGroup(t, life)
	const grace = time.Second
	sup := startSupervisor(t, 0, grace)
	fmt.Fprintf(sup.stdin, "register %d\nregister %d\n", stubborn.pgid(), polite.pgid())
	start := time.Now()
	feed(t, sup, "")
	// Outcomes, not durations: the polite group ends by SIGTERM, the stubborn one by SIGKILL,
	// and never before the grace (a loaded machine can only make it later).
	for _, c := range []struct {
		g   group
		sig syscall.Signal
	}{{polite, syscall.SIGTERM}, {stubborn, syscall.SIGKILL}} {
		err := c.g.h.wait(10 * time.Second)
		var ee interface{ Sys() any }
		if !errors.As(err, &ee) {
			t.Fatalf("group ended with %v, want death by %v", err, c.sig)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || ws.Signal() != c.sig {
			t.Errorf("group ended by %v, want %v", err, c.sig)
		}
	}
	if d := time.Since(start); d < grace {
		t.Errorf("stubborn group killed after %v, before the grace of %v", d, grace)
	}
	exitsCleanly(t, sup, 5*time.Second)
}

// TestServeIgnoresHangup: a terminal's ^C and hangup reach every process of its session; the
// supervisor is in its own, but must survive them regardless.
func TestServeIgnoresHangup(t *testing.T) {
	life := newLifeline(t)
	g := startGroup(t, life)
	sup := startSupervisor(t, 0, 5*time.Second)
	sup.cmd.Process.Signal(syscall.SIGINT)
	sup.cmd.Process.Signal(syscall.SIGHUP)
	feed(t, sup, fmt.Sprintf("register %d\n", g.pgid()))
	exitsCleanly(t, sup, 10*time.Second)
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(g.leader()) })
}

// TestServeCancel: cancelling Serve's context stops it without signalling anything.
func TestServeCancel(t *testing.T) {
	life := newLifeline(t)
	g := startGroup(t, life)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- supervise.Serve(ctx, r, supervise.Config{Grace: 100 * time.Millisecond}) }()
	fmt.Fprintf(w, "register %d\n", g.pgid())
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if !alive(g.leader()) {
		t.Fatalf("a cancelled Serve signalled group %d", g.pgid())
	}
}

// TestServeNoLegacyDowngrade: a group whose identity form was refused as stale (another start)
// is not then covered by the legacy "register <pgid>", as the Hermes supervisor never covers it;
// a group whose identity form is accepted afterwards is covered again.
func TestServeNoLegacyDowngrade(t *testing.T) {
	life := newLifeline(t)
	g, again := startGroup(t, life), startGroup(t, life)
	sup := startSupervisor(t, 0, 5*time.Second)
	feed(t, sup, fmt.Sprintf("register %d %d %d\nregister %d\nregister %d %d %d\nregister %d %d %d\nregister %d\n",
		g.pgid(), g.pgid(), g.leader().Start+1, g.pgid(),
		again.pgid(), again.pgid(), again.leader().Start+1, again.pgid(), again.pgid(), again.leader().Start, again.pgid()))
	exitsCleanly(t, sup, 10*time.Second)
	testproc.WaitFor(t, 5*time.Second, func() error { return allGone(again.leader()) })
	if !alive(g.leader()) {
		t.Errorf("group %d, refused in the identity form, was covered by the legacy form and signalled", g.pgid())
	}
}
