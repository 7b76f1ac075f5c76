package custody_test

// Ownership transfer on Windows, against real processes, pipes and job objects: the test binary
// re-executes itself as giver, receiver and worker. The job is the cover: it dies with its last
// handle (KILL_ON_JOB_CLOSE), so who holds a handle decides who the child dies with.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/stop"
)

func init() {
	testproc.Register("giver", helperGiver)
	testproc.Register("receiver", helperReceiver)
	testproc.Register("held", helperHeld)
}

// helperHeld is a child that nothing but its job ends: no lifeline (Wine ends a pipe whose
// writer lives when the reader's parent dies, so a stdin lifeline would end it for the wrong
// reason). It starts a leaf like itself unless args[0] is "leaf", prints "ready <pid> <start>"
// for itself and the leaf, and sleeps.
func helperHeld(args []string) int {
	self, err := procid.Self()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	report := fmt.Sprintf("ready %d %d", self.PID, self.Start)
	if len(args) == 0 {
		leaf := exec.Command(os.Args[0], "leaf")
		leaf.Env = os.Environ() // the helper variable: a held leaf
		_, line, err := startWorker(leaf)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		report += " " + line
	}
	fmt.Println(report)
	time.Sleep(time.Hour) // its job ends it, or the hour bounds a leak
	return 0
}

// helperGiver starts an owned held child with a leaf, recording in the ledger args[0], mints a
// grant for it (TTL args[1], if given), and prints "ready <child> <leaf>" (incarnations),
// "grant <grant>", then, when the grant ends, "result <outcome> <receiver> <reason>". It lives
// until its stdin closes. Only the job can end the child and its leaf.
func helperGiver(args []string) int {
	o := &custody.Owner{Ledger: ledger.Open(args[0])}
	ttl := time.Minute
	if len(args) > 1 {
		ttl, _ = time.ParseDuration(args[1])
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testproc.Env("held"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	c, err := o.Start(context.Background(), cmd, custody.StartOptions{Purpose: "gateway"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "ready ") {
	}
	g, err := c.Grant(custody.GrantOptions{TTL: ttl})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println(sc.Text())
	fmt.Println("grant", g)
	go func() {
		res, _ := g.Wait(context.Background())
		fmt.Println("result", res.Outcome, res.Receiver, strings.ReplaceAll(res.Reason, " ", "_"))
	}()
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// helperReceiver adopts the grant args[1] into an owner of ledger args[0] and prints "adopted
// <pid>" or "error <err>". With args[2], it stops at that step of the redemption, printing
// "at <step>", and blocks there. It lives until its stdin closes.
func helperReceiver(args []string) int {
	if len(args) > 2 {
		custody.SetAdoptHook(func(step string) {
			if step == args[2] {
				fmt.Println("at", step)
				io.Copy(io.Discard, os.Stdin)
				os.Exit(0)
			}
		})
	}
	o := &custody.Owner{Ledger: ledger.Open(args[0])}
	c, err := o.Adopt(context.Background(), args[1])
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("adopted", c.ID.PID)
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// winGiver is a started giver helper and what it said.
type winGiver struct {
	*testproc.Proc
	ids   []procid.ID // the worker, then its grandchild
	grant string
}

func startWinGiver(t *testing.T, led string, args ...string) *winGiver {
	t.Helper()
	testproc.Use("held") // the giver starts it
	cmd := testproc.Helper(t, "giver", append([]string{led}, args...)...)
	p := testproc.Start(t, cmd)
	g := &winGiver{Proc: p}
	g.ids = testid.Parse(t, p.Expect("ready ", 30*time.Second))
	g.grant = p.Expect("grant ", 10*time.Second)[0]
	return g
}

func startReceiver(t *testing.T, led, grant string, args ...string) *testproc.Proc {
	t.Helper()
	return testproc.Start(t, testproc.Helper(t, "receiver", append([]string{led, grant}, args...)...))
}

// terminate kills p (TerminateProcess, which runs none of its code) and waits for it.
func terminate(t *testing.T, p *testproc.Proc) {
	t.Helper()
	if err := p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
}

func waitAllGone(t *testing.T, what string, ids []procid.ID) {
	t.Helper()
	testproc.WaitFor(t, 10*time.Second, func() error {
		for _, id := range ids {
			if err := gone(id); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		return nil
	})
}

func mustRun(t *testing.T, what string, ids []procid.ID) {
	t.Helper()
	for _, id := range ids {
		if err := id.Verify(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// rowOwner returns the owner the ledger led records for pid.
func rowOwner(t *testing.T, led string, pid int) int {
	t.Helper()
	rows, err := ledger.Open(led).Rows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.PID == pid && r.Owner != nil {
			return *r.Owner
		}
	}
	t.Fatalf("no row with an owner for pid %d in %+v", pid, rows)
	return 0
}

// TestTransferWindows: after the receipt the giver is terminated and the worker and its
// grandchild live on, held by the receiver's handle on their job; then the receiver is
// terminated and they die with that job.
func TestTransferWindows(t *testing.T) {
	led := filepath.Join(testproc.TempDir(t), "spawn-ledger.json")
	g := startWinGiver(t, led)
	r := startReceiver(t, led, g.grant)
	if f := r.Expect("adopted ", 30*time.Second); f[0] != strconv.Itoa(g.ids[0].PID) {
		t.Fatalf("the receiver adopted pid %s, want %d", f[0], g.ids[0].PID)
	}
	if f := g.Expect("result ", 30*time.Second); f[0] != "transferred" || f[1] != strconv.Itoa(r.Process.Pid) {
		t.Fatalf("the giver's result %q, want transferred to %d", f, r.Process.Pid)
	}
	if owner := rowOwner(t, led, g.ids[0].PID); owner != r.Process.Pid {
		t.Fatalf("the ledger names owner %d, want the receiver %d", owner, r.Process.Pid)
	}
	terminate(t, g.Proc)
	mustRun(t, "after the giver's death", g.ids)
	terminate(t, r)
	waitAllGone(t, "after the receiver's death", g.ids)
}

// TestTransferGiverDiesFirst: a giver terminated before any redemption takes its child and the
// grandchild with it, and its grant is refused afterwards.
func TestTransferGiverDiesFirst(t *testing.T) {
	led := filepath.Join(testproc.TempDir(t), "spawn-ledger.json")
	g := startWinGiver(t, led)
	terminate(t, g.Proc)
	waitAllGone(t, "after the giver's death", g.ids)
	r := startReceiver(t, led, g.grant)
	if l := r.Line(30 * time.Second); !strings.HasPrefix(l, "error ") || !strings.Contains(l, "grant refused") {
		t.Fatalf("a dead giver's grant: %q, want refused", l)
	}
}

// TestTransferReceiverDiesMidway: a receiver terminated after its receipt but before it told the
// giver leaves the child with the giver, which writes itself back into the row, and the child
// then dies with the giver.
func TestTransferReceiverDiesMidway(t *testing.T) {
	led := filepath.Join(testproc.TempDir(t), "spawn-ledger.json")
	g := startWinGiver(t, led)
	r := startReceiver(t, led, g.grant, "receipt")
	r.Expect("at receipt", 30*time.Second)
	if owner := rowOwner(t, led, g.ids[0].PID); owner != r.Process.Pid {
		t.Fatalf("at its receipt the ledger names owner %d, want the receiver %d", owner, r.Process.Pid)
	}
	terminate(t, r)
	if f := g.Expect("result ", 30*time.Second); f[0] != "refused" {
		t.Fatalf("the giver's result %q, want refused", f)
	}
	mustRun(t, "after the receiver's death", g.ids)
	if owner := rowOwner(t, led, g.ids[0].PID); owner != g.Process.Pid {
		t.Fatalf("the ledger names owner %d, want the giver %d back", owner, g.Process.Pid)
	}
	terminate(t, g.Proc)
	waitAllGone(t, "after the giver's death", g.ids)
}

// forgeGrant re-encodes a grant with change applied to its fields.
func forgeGrant(t *testing.T, grant string, change func(*custody.GrantToken)) string {
	t.Helper()
	tok, err := custody.ParseGrant(grant)
	if err != nil {
		t.Fatal(err)
	}
	change(&tok)
	b, _ := json.Marshal(tok)
	return "custody-grant-v1:" + base64.RawURLEncoding.EncodeToString(b)
}

// TestTransferRefusals: malformed, forged, expired, misdirected and reused grants are refused
// with the ledger unchanged, and the genuine grant still works after every refusal before it;
// the adopted child's exit code reaches its new owner.
func TestTransferRefusals(t *testing.T) {
	giver := newOwner(t)
	cmd, w := workerCmd(t)
	c := owned(t, giver, cmd, custody.StartOptions{Purpose: "gateway"})
	w.ready(t)
	g, err := c.Grant(custody.GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	receiver := newOwner(t)
	receiver.Ledger = giver.Ledger
	before, _ := os.ReadFile(giver.Ledger.Path())
	emptyObj := "custody-grant-v1:" + base64.RawURLEncoding.EncodeToString([]byte("{}"))
	for _, tc := range []struct {
		name  string
		grant string
		want  error
	}{
		{"empty", "", custody.ErrGrantMalformed},
		{"not base64", "custody-grant-v1:!!!", custody.ErrGrantMalformed},
		{"empty object", emptyObj, custody.ErrGrantMalformed},
		{"truncated", g.String()[:len(g.String())-5], custody.ErrGrantMalformed},
		{"not a grant pipe", forgeGrant(t, g.String(), func(tok *custody.GrantToken) { tok.Sock = `\\.\pipe\other` }), custody.ErrGrantMalformed},
		{"forged secret", forgeGrant(t, g.String(), func(tok *custody.GrantToken) { tok.Secret = custody.NewSecret() }), custody.ErrGrantRefused},
		{"expired", forgeGrant(t, g.String(), func(tok *custody.GrantToken) { tok.Expires = time.Now().Add(-time.Second).UnixMilli() }), custody.ErrGrantExpired},
		{"another giver", forgeGrant(t, g.String(), func(tok *custody.GrantToken) { tok.Giver = c.ID.PID }), custody.ErrGrantRefused},
		{"no pipe", forgeGrant(t, g.String(), func(tok *custody.GrantToken) { tok.Sock += "0" }), custody.ErrGrantRefused},
	} {
		_, err := receiver.Adopt(context.Background(), tc.grant)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error of more than one line: %q", tc.name, err)
		}
		if after, _ := os.ReadFile(giver.Ledger.Path()); !bytes.Equal(before, after) {
			t.Fatalf("%s changed the ledger:\n%s\n%s", tc.name, before, after)
		}
	}
	if res := g.Result(); res.Outcome != 0 {
		t.Fatalf("refusals ended the grant: %+v", res)
	}
	adopted, err := receiver.Adopt(context.Background(), g.String())
	if err != nil {
		t.Fatalf("the genuine grant, after the refusals: %v", err)
	}
	if res, _ := g.Wait(context.Background()); res.Outcome != custody.Transferred || res.Receiver != os.Getpid() {
		t.Fatalf("giver's result %+v", res)
	}
	if _, err := receiver.Adopt(context.Background(), g.String()); !errors.Is(err, custody.ErrGrantRefused) {
		t.Errorf("a grant used twice: %v", err)
	}
	if res := c.Stop(context.Background(), stop.Options{}); res.Outcome != stop.NoAuthority {
		t.Errorf("the giver stopped a child it handed over: %+v", res)
	}
	if res := adopted.Stop(context.Background(), stop.Options{}); !res.OK() {
		t.Fatalf("the receiver's stop: %+v", res)
	}
	// TerminateJobObject(job, 1): the adopter, not the parent, reads the code through its handle.
	if ee, ok := errors.AsType[*custody.ExitError](adopted.Wait()); !ok || ee.Code != 1 {
		t.Errorf("an adopted child's Wait after its stop: %v, want exit status 1", adopted.Wait())
	}
	if rows, err := giver.Ledger.Rows(context.Background()); err != nil || len(rows) != 0 {
		t.Errorf("rows after the receiver's stop: %v, %v", rows, err)
	}
}

// TestTransferVoid: a grant nobody redeems expires, and is refused afterwards.
func TestTransferVoid(t *testing.T) {
	o := newOwner(t)
	cmd, w := workerCmd(t)
	c := owned(t, o, cmd, custody.StartOptions{Purpose: "gateway"})
	w.ready(t)
	g, err := c.Grant(custody.GrantOptions{TTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := g.Wait(context.Background()); res.Outcome != custody.Expired {
		t.Fatalf("an unredeemed grant ended %+v, want expired", res)
	}
	if _, err := o.Adopt(context.Background(), g.String()); !errors.Is(err, custody.ErrGrantExpired) {
		t.Errorf("an expired grant: %v", err)
	}
	if err := c.ID.Verify(); err != nil {
		t.Errorf("the child after its grant expired: %v", err)
	}
}

// TestTransferSlot: a slot hands its generation to another slot, which keeps its number and
// replaces it with the next; the giving slot stays fenced on it until it has exited.
func TestTransferSlot(t *testing.T) {
	ctx := context.Background()
	a := &custody.Slot{Owner: newOwner(t), Purpose: "watcher"}
	cmd, w := workerCmd(t)
	g1, err := a.Replace(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupChild(t, g1) })
	w.ready(t)
	grant, gen, err := a.Grant(custody.GrantOptions{})
	if err != nil || gen != 1 {
		t.Fatalf("slot grant: generation %d, %v", gen, err)
	}
	recv := newOwner(t)
	recv.Ledger = a.Owner.Ledger
	b := &custody.Slot{Owner: recv, Purpose: "watcher"}
	adopted, err := b.Adopt(ctx, grant.String())
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := grant.Wait(ctx); res.Outcome != custody.Transferred {
		t.Fatalf("the slot's grant ended %+v", res)
	}
	if cur, n := b.Current(); cur != adopted || n != 1 {
		t.Fatalf("the adopting slot runs %p, generation %d; want the adopted one (%p), 1", cur, n, adopted)
	}
	cmd2, _ := workerCmd(t)
	if _, err := a.Replace(ctx, cmd2); !isFenced(err) {
		t.Fatalf("the giving slot replaced a generation it handed over: %v", err)
	}
	cmd3, w3 := workerCmd(t)
	g2, err := b.Replace(ctx, cmd3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupChild(t, g2) })
	w3.ready(t)
	if err := gone(adopted.ID); err != nil {
		t.Errorf("the adopted generation after the adopting slot's Replace: %v", err)
	}
	if _, n := b.Current(); n != 2 {
		t.Errorf("the adopting slot's generation %d, want 2", n)
	}
}

func isFenced(err error) bool {
	_, ok := errors.AsType[*custody.FencedError](err)
	return ok
}
