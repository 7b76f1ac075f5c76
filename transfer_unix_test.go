//go:build linux || darwin

package custody_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

const nobody = 65534

func init() {
	testproc.Register("giver", helperGiver)
	testproc.Register("receiver", helperReceiver)
	testproc.Register("handed-worker", helperHandedWorker)
	testproc.Register("stopping-receiver", helperStoppingReceiver)
}

// helperStoppingReceiver adopts the grant args[1] into an owner of ledger args[0], prints
// "adopted <pid>", stops the child and prints "stopped <outcome>", then blocks until killed.
func helperStoppingReceiver(args []string) int {
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: &supervise.Client{Grace: time.Second}}
	c, err := o.Adopt(context.Background(), args[1])
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("adopted", c.ID.PID)
	res := c.Stop(context.Background(), custody.StopOptions{Grace: time.Second})
	fmt.Println("stopped", res.Outcome)
	select {}
}

// helperHandedWorker is a child to be handed over. It starts a grandchild in its process group
// and an escapee in a session of its own (which leaves a process group but not a cgroup), prints
// "ready <pid> <grandchild> <escapee>", and lives until its stdin, the lifeline, closes.
func helperHandedWorker([]string) int {
	var pids []string
	for _, attr := range []*syscall.SysProcAttr{nil, {Setsid: true}} {
		g := exec.Command(os.Args[0])
		g.Env = append(os.Environ(), testproc.Env("worker"))
		g.Stdin, g.SysProcAttr = os.Stdin, attr
		if err := g.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		pids = append(pids, strconv.Itoa(g.Process.Pid))
	}
	fmt.Println("ready", os.Getpid(), strings.Join(pids, " "))
	bufio.NewScanner(os.Stdin).Scan()
	return 0
}

// helperGiver starts an owned handed-worker, mints a grant for it, and prints "child <pid>
// <start>", "grandchild <pid>", "escapee <pid>", "supervisor <pid>", "grant <grant>", then,
// when the grant ends, "result <outcome> <receiver> <reason>". It blocks until killed. Its
// workers' lifeline is its descriptor 3, the test's (see lifeline).
func helperGiver(args []string) int {
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: &supervise.Client{Grace: time.Second}}
	ttl := time.Minute
	if len(args) > 1 {
		ttl, _ = time.ParseDuration(args[1])
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testproc.Env("handed-worker"))
	cmd.Stdin = os.NewFile(3, "lifeline") // the test's, not the giver's: it outlives the giver
	out, _ := cmd.StdoutPipe()
	c, err := o.Start(context.Background(), cmd, custody.StartOptions{Purpose: "gateway"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sc := bufio.NewScanner(out)
	sc.Scan()
	f := strings.Fields(sc.Text())
	g, err := c.Grant(custody.GrantOptions{TTL: ttl})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("child", c.ID.PID, c.ID.Start)
	fmt.Println("grandchild", f[2])
	fmt.Println("escapee", f[3])
	fmt.Println("supervisor", o.Supervisor.PID())
	fmt.Println("grant", g)
	res, _ := g.Wait(context.Background())
	fmt.Println("result", res.Outcome, res.Receiver, res.Reason)
	select {}
}

// helperReceiver adopts the grant args[1] into an owner of ledger args[0] and prints "adopted
// <pid>" or "error <err>". With args[2], it stops at that step of the redemption, printing
// "at <step>", and blocks there until killed. Once adopted it blocks until killed.
func helperReceiver(args []string) int {
	if len(args) > 2 {
		custody.SetAdoptHook(func(step string) {
			if step == args[2] {
				fmt.Println("at", step)
				select {}
			}
		})
	}
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: &supervise.Client{Grace: time.Second}}
	c, err := o.Adopt(context.Background(), args[1])
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("adopted", c.ID.PID)
	select {}
}

// giver is a started giver helper and what it said.
type giver struct {
	*testproc.Proc
	child, grandchild, escapee, supervisor procid.ID
	grant                                  string
}

func startGiver(t *testing.T, env *transferEnv, args ...string) *giver {
	t.Helper()
	testproc.Use("handed-worker") // the giver starts it
	cmd := env.command(t, "giver", append([]string{env.ledger}, args...)...)
	cmd.ExtraFiles = []*os.File{lifeline(t)}
	p := testproc.Start(t, cmd)
	g := &giver{Proc: p}
	f := p.Expect("child ", 30*time.Second)
	g.child = pidIncarnation(t, f[0])
	g.grandchild = pidIncarnation(t, p.Expect("grandchild ", 10*time.Second)[0])
	g.escapee = pidIncarnation(t, p.Expect("escapee ", 10*time.Second)[0])
	g.supervisor = pidIncarnation(t, p.Expect("supervisor ", 10*time.Second)[0])
	g.grant = p.Expect("grant ", 10*time.Second)[0]
	removeGrantDir(t, g.grant)
	return g
}

// removeGrantDir removes the grant's socket directory at the end of the test: a giver killed by
// SIGKILL has no chance to.
func removeGrantDir(t *testing.T, grant string) {
	t.Helper()
	tok, err := custody.ParseGrant(grant)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(tok.Sock)) })
}

// transferEnv runs the helpers as root or as an ordinary user.
type transferEnv struct {
	ledger string
	exe    string              // the test binary, where the user can run it
	cred   *syscall.Credential // nil: the test's own user
	env    []string            // more environment for the helpers
}

func newTransferEnv(t *testing.T, asNobody bool) *transferEnv {
	t.Helper()
	if !asNobody {
		exe, _ := os.Executable()
		return &transferEnv{ledger: ledgerPath(t), exe: exe}
	}
	testproc.RequireRoot(t)
	// The test binary lives in go's 0700 work directory: copy it where nobody can run it.
	dir, err := os.MkdirTemp("", "custody-transfer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, _ := os.Executable()
	copyFile(t, exe, filepath.Join(dir, "custody.test"))
	state := filepath.Join(dir, "state")
	if err := errors.Join(os.Chmod(dir, 0o755), os.Mkdir(state, 0o700), os.Chown(state, nobody, nobody)); err != nil {
		t.Fatal(err)
	}
	return &transferEnv{ledger: filepath.Join(state, "spawn-ledger.json"), exe: filepath.Join(dir, "custody.test"),
		cred: &syscall.Credential{Uid: nobody, Gid: nobody}}
}

func (e *transferEnv) command(t *testing.T, helper string, args ...string) *exec.Cmd {
	cmd := exec.Command(e.exe, args...)
	cmd.Env = append(append(os.Environ(), e.env...), testproc.Env(helper))
	if e.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	}
	return cmd
}

// lifeline returns the read end of a pipe whose write end the test holds until it ends: workers
// read it, so that a broken test leaves none behind.
func lifeline(t *testing.T) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// pidIncarnation reads a live process's identity from its PID, given as text.
func pidIncarnation(t *testing.T, pid string) procid.ID {
	t.Helper()
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatalf("pid %q: %v", pid, err)
	}
	inc, err := procid.Read(n)
	if err != nil {
		t.Fatalf("read pid %d: %v", n, err)
	}
	return inc.ID
}

// gone is nil once id's process has exited.
func gone(id procid.ID) error {
	err := id.Verify()
	if errors.Is(err, procid.ErrGone) || errors.Is(err, procid.ErrReused) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%v is still alive", id)
	}
	return err
}

func waitGone(t *testing.T, what string, ids ...procid.ID) {
	t.Helper()
	for _, id := range ids {
		testproc.WaitFor(t, 15*time.Second, func() error {
			if err := gone(id); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		})
	}
}

func mustAlive(t *testing.T, what string, ids ...procid.ID) {
	t.Helper()
	for _, id := range ids {
		if err := id.Verify(); err != nil {
			t.Fatalf("%s %v: %v", what, id, err)
		}
	}
}

// scopeOf reads the kind of scope the ledger names for pid, and logs it.
func scopeOf(t *testing.T, path string, pid int) string {
	t.Helper()
	return field(t, path, pid, "scope")
}

// ownerOf reads the owner the ledger names for pid.
func ownerOf(t *testing.T, path string, pid int) int {
	t.Helper()
	for _, r := range rowsOf[struct{ PID, Owner int }](t, path) {
		if r.PID == pid && r.Owner != 0 {
			return r.Owner
		}
	}
	t.Fatalf("no row with an owner for pid %d", pid)
	return 0
}

// spawnerState judges the spawner of record of pid's row as reap does.
func spawnerState(t *testing.T, path string, pid int) procid.State {
	t.Helper()
	type row struct {
		PID        int
		BootID     *string  `json:"boot_id"`
		SpawnerPID int      `json:"spawner_pid"`
		Ticks      *uint64  `json:"spawner_start_ticks"`
		Boot       *float64 `json:"spawner_boot"`
		Create     *float64 `json:"spawner_create"`
		PidfdID    *uint64  `json:"spawner_pidfd_id"`
	}
	for _, r := range rowsOf[row](t, path) {
		if r.PID == pid {
			rec := procid.Record{PID: r.SpawnerPID, StartTicks: r.Ticks, BootID: r.BootID, BootStart: r.Boot,
				CreateTime: r.Create, PidfdID: r.PidfdID}
			st, _ := rec.Check(true)
			return st
		}
	}
	t.Fatalf("no row for pid %d", pid)
	return procid.Unknown
}

// field reads one string field of pid's row.
func field(t *testing.T, path string, pid int, name string) string {
	t.Helper()
	for _, r := range rowsOf[map[string]any](t, path) {
		if r["pid"] == float64(pid) {
			v, _ := r[name].(string)
			t.Logf("pid %d: %s %q", pid, name, v)
			return v
		}
	}
	t.Fatalf("no row for pid %d", pid)
	return ""
}

// rowsOf decodes the ledger file at path into rows of type T. It reads the file itself: the
// ledger may be another user's (a receiver's), which root's ledger handle rightly refuses to
// trust.
func rowsOf[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []T
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

func killAndWait(t *testing.T, p *testproc.Proc) {
	t.Helper()
	p.Process.Kill()
	p.Wait()
}

// TestTransfer: after the receipt the giver is SIGKILLed and the child lives, owned by the
// receiver; then the receiver is SIGKILLed and the child's whole scope dies with it, its
// grandchild escaped to a session of its own too (a cgroup holds it; on the process-group path
// the receiver's supervisor finds it by the scope id). As the test's user (root: cgroups where writable, and
// process groups) and as an ordinary user.
func TestTransfer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		asNobody bool
		env      []string
	}{{"self", false, nil}, {"self-pgrp", false, []string{scope.EnvContainment + "=process-group"}}, {"nobody", true, nil}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTransferEnv(t, tc.asNobody)
			env.env = tc.env
			g := startGiver(t, env)
			r := testproc.Start(t, env.command(t, "receiver", env.ledger, g.grant))
			if f := r.Expect("adopted ", 30*time.Second); f[0] != strconv.Itoa(g.child.PID) {
				t.Fatalf("adopted %v, want pid %d", f, g.child.PID)
			}
			res := g.Expect("result ", 10*time.Second)
			if res[0] != "transferred" || res[1] != strconv.Itoa(r.Process.Pid) {
				t.Fatalf("giver's result %v, want transferred to %d", res, r.Process.Pid)
			}
			if owner := ownerOf(t, env.ledger, g.child.PID); owner != r.Process.Pid {
				t.Fatalf("row's owner %d, want the receiver %d", owner, r.Process.Pid)
			}
			killAndWait(t, g.Proc)
			// The giver's supervisor exits at its owner's death, after stopping what it still
			// covered: once it is gone, the child has survived it.
			waitGone(t, "the giver's supervisor", g.supervisor)
			mustAlive(t, "after the giver's death, the child", g.child, g.grandchild, g.escapee)
			if owner := ownerOf(t, env.ledger, g.child.PID); owner != r.Process.Pid {
				t.Fatalf("row's owner %d after the giver's death, want the receiver %d", owner, r.Process.Pid)
			}
			// The row's spawner of record is the receiver, alive: a reap must keep the child.
			if st := spawnerState(t, env.ledger, g.child.PID); st != procid.Alive {
				t.Fatalf("the row's spawner (the receiver, alive) reads as %v: a reap would stop the child", st)
			}
			killAndWait(t, r)
			waitGone(t, "after the receiver's death, the child's group", g.child, g.grandchild)
			// The escapee left the group but not the cgroup, nor the environment that carries the
			// scope id the row records, with which the receiver covered the group.
			waitGone(t, "after the receiver's death, the child's escaped grandchild", g.escapee)
		})
	}
}

// TestTransferThenStop: the receiver's stop of an adopted child ends its whole scope, the
// grandchild that escaped to a session of its own included (on the process-group path through
// the scope id the row records).
func TestTransferThenStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{{"self", nil}, {"self-pgrp", []string{scope.EnvContainment + "=process-group"}}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTransferEnv(t, false)
			env.env = tc.env
			g := startGiver(t, env)
			r := testproc.Start(t, env.command(t, "stopping-receiver", env.ledger, g.grant))
			r.Expect("adopted ", 30*time.Second)
			if f := r.Expect("stopped ", 30*time.Second); f[0] != "exited" {
				t.Fatalf("the receiver's stop: %v, want exited", f)
			}
			waitGone(t, "after the receiver's stop, the child's scope", g.child, g.grandchild, g.escapee)
		})
	}
}

// TestTransferGiverDiesFirst: a giver killed before any redemption takes the child with it, and
// its grant is refused afterwards.
func TestTransferGiverDiesFirst(t *testing.T) {
	env := newTransferEnv(t, false)
	g := startGiver(t, env)
	killAndWait(t, g.Proc)
	waitGone(t, "after the giver's death, the child's group", g.child, g.grandchild)
	r := testproc.Start(t, env.command(t, "receiver", env.ledger, g.grant))
	if f := r.Expect("error ", 30*time.Second); !strings.Contains(strings.Join(f, " "), "grant refused") {
		t.Fatalf("redeeming a dead giver's grant: %v", f)
	}
}

// TestTransferReceiverDiesMidway: a receiver killed before its receipt, or after it but before
// it covered the child, leaves the child with the giver, which dies with it.
func TestTransferReceiverDiesMidway(t *testing.T) {
	for _, step := range []string{"proved", "receipt"} {
		t.Run(step, func(t *testing.T) {
			env := newTransferEnv(t, false)
			g := startGiver(t, env)
			r := testproc.Start(t, env.command(t, "receiver", env.ledger, g.grant, step))
			r.Expect("at "+step, 30*time.Second)
			killAndWait(t, r)
			if res := g.Expect("result ", 20*time.Second); res[0] != "refused" {
				t.Fatalf("giver's result %v, want refused", res)
			}
			mustAlive(t, "after the receiver's death, the child", g.child, g.grandchild)
			if owner := ownerOf(t, env.ledger, g.child.PID); owner != g.Process.Pid {
				t.Fatalf("row's owner %d, want the giver %d", owner, g.Process.Pid)
			}
			killAndWait(t, g.Proc)
			waitGone(t, "after the giver's death, the child's group", g.child, g.grandchild)
		})
	}
}
