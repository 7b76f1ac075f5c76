package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() {
	testproc.Register("owned-tree", helperOwnedTree)
	testproc.Register("owner-reuse", helperOwnerReuse)
}

// helperOwnedTree is the tree custody run starts: the root starts a child that leaves its session
// (setsid) and a double-forked descendant (its parent exits at once), and each says "proc <role>
// <pid> <start>". Each lives until SIGTERM or SIGKILL reaches it (the leaf until SIGKILL); the
// test's mark finds survivors.
func helperOwnedTree(args []string) int {
	role := "root"
	if len(args) > 0 {
		role = args[0]
	}
	self, err := procid.Self()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	start := func(role string, attr *syscall.SysProcAttr) *exec.Cmd {
		c := exec.Command(os.Args[0], role)
		c.Stdout, c.Stderr, c.SysProcAttr = os.Stdout, os.Stderr, attr
		if err := c.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		return c
	}
	switch role {
	case "root":
		start("setsid", &syscall.SysProcAttr{Setsid: true})
		start("fork", nil).Wait()
	case "fork":
		start("leaf", nil)
		return 0 // the leaf is orphaned: a double fork
	}
	// The leaf ignores SIGTERM: only the kill after the grace ends it.
	wake := syscall.SIGTERM
	if role == "leaf" {
		signal.Ignore(syscall.SIGTERM)
		wake = syscall.SIGUSR2 // never sent: the channel only keeps the runtime from a deadlock
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, wake)
	fmt.Printf("proc %s %d %d\n", role, self.PID, self.Start)
	<-c
	return 0
}

// callers are the programs that start custody run in the tests, each as its language's
// subprocess API does: custody's PID on stdout, then a line on stdin makes them exit at once,
// without waiting for custody.
var callers = map[string][]string{
	"python": {"/usr/bin/python3", "-c", `
import subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
print("custody", p.pid, flush=True)
sys.stdin.readline()
`},
	"node": {"node", "-e", `
const { spawn } = require("child_process");
const c = spawn(process.argv[1], process.argv.slice(2), { stdio: ["ignore", "inherit", "inherit"] });
console.log("custody " + c.pid);
process.stdin.once("data", () => process.exit(0));
`},
}

// ownedTree is a custody run and its tree, as started by a caller.
type ownedTree struct {
	caller  *testproc.Proc
	stderr  *screen
	led     string
	custody procid.ID
	procs   map[string]procid.ID // root, setsid, leaf
}

// startOwnedTree has the caller lang (a key of callers) start custody run with extra flags (and
// its tree); asUser runs everything as uid 65534, on the process-group path.
func startOwnedTree(t *testing.T, lang string, asUser bool, flags ...string) *ownedTree {
	t.Helper()
	argv := callers[lang]
	if _, err := exec.LookPath(argv[0]); err != nil {
		testproc.Skip(t, "no %s to be the caller: %v", argv[0], err)
	}
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark) // last: after the test's own cleanup by handle
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := testproc.TempDir(t)
	led := filepath.Join(dir, "state", "spawn-ledger.json")
	cmd := testproc.Command(t, argv[0], argv[1:]...)
	if asUser {
		asNobody(t, cmd, dir) // makes cmd run the copied binary: put the caller back
		exe = cmd.Path
		cmd.Path, cmd.Args = argv[0], argv
		if p, err := exec.LookPath(argv[0]); err == nil {
			cmd.Path = p
		}
	}
	custody := append([]string{exe, "--ledger", led, "run", "--grace", "1s"}, flags...)
	cmd.Args = append(cmd.Args, append(custody, "--", exe)...)
	cmd.Env = append(os.Environ(), testproc.Env("custody"), nextHelperEnv+"="+testproc.Use("owned-tree"), mark)
	o := &ownedTree{stderr: &screen{}, led: led, procs: map[string]procid.ID{}}
	cmd.Stderr = o.stderr
	o.caller = testproc.Start(t, cmd)
	pid := atoi(o.caller.Expect("custody ", 10*time.Second)[0])
	o.custody = readID(t, pid) // the caller's unreaped child: the PID is still custody's
	for len(o.procs) < 3 {
		f := o.caller.Expect("proc ", 20*time.Second)
		o.procs[f[0]] = procid.ID{PID: atoi(f[1]), Start: uint64(atoi(f[2]))}
	}
	// Survivors of a failure are killed through a pidfd proven to name them, the custody run first
	// so that its stop of the child cannot be taken for the test's.
	t.Cleanup(func() {
		killID(o.custody)
		for _, id := range o.procs {
			killID(id)
		}
	})
	return o
}

// all returns every process of the tree and custody run itself.
func (o *ownedTree) all() map[string]procid.ID {
	all := map[string]procid.ID{"custody run": o.custody}
	for role, id := range o.procs {
		all[role] = id
	}
	return all
}

// awaitGone waits until every named process has gone (exited, or its PID reused).
func awaitGone(t *testing.T, how string, ids map[string]procid.ID) {
	t.Helper()
	testproc.WaitFor(t, 20*time.Second, func() error { // grace 1s; a loaded machine takes longer
		for role, id := range ids {
			if id.Verify() == nil {
				return fmt.Errorf("%s: %s %v still runs", how, role, id)
			}
		}
		return nil
	})
}

// checkCaller checks that the child's row names the caller as the owner custody serves.
func (o *ownedTree) checkCaller(t *testing.T, want procid.ID) {
	t.Helper()
	awaitRow(t, o.led, strconv.Itoa(o.procs["root"].PID))
	var rows []struct {
		PID        int     `json:"pid"`
		Owner      int     `json:"owner"`
		CallerPID  *int    `json:"caller_pid"`
		CallerTick *uint64 `json:"caller_start_ticks"`
	}
	b, err := os.ReadFile(o.led)
	if err == nil {
		err = json.Unmarshal(b, &rows)
	}
	if err != nil || len(rows) != 1 {
		t.Fatalf("ledger: %v, %d rows", err, len(rows))
	}
	r := rows[0]
	if r.Owner != o.custody.PID || r.CallerPID == nil || *r.CallerPID != want.PID || r.CallerTick == nil || *r.CallerTick != want.Start {
		t.Errorf("row of %d: owner %d, caller %v@%v; want owner %d (custody run), caller %v", r.PID, r.Owner,
			r.CallerPID, r.CallerTick, o.custody.PID, want)
	}
}

// TestRunDiesWithCaller: a Python and a Node program start custody run (the default, --owner
// parent) with a tree holding a setsid child and a double-forked descendant, and end: SIGKILL,
// SIGTERM, or a normal exit without waiting. Every process of the tree and custody run itself are
// gone, custody run said why in one line, and the ledger holds no row.
func TestRunDiesWithCaller(t *testing.T) {
	for _, lang := range []string{"python", "node"} {
		for _, end := range []string{"SIGKILL", "SIGTERM", "exit"} {
			t.Run(lang+"/"+end, func(t *testing.T) {
				o := startOwnedTree(t, lang, false)
				callerID := readID(t, o.caller.Process.Pid)
				o.checkCaller(t, callerID)
				endCaller(o.caller, end)
				// custody run holds the caller's stderr: waited only once custody is gone, the
				// caller's Wait has read all it wrote. Waited first, Wait would give up on the
				// output WaitDelay after the caller's end, and lose a line custody was slow to write.
				awaitGone(t, lang+" caller "+end, o.all())
				o.caller.Wait()
				want := fmt.Sprintf("custody: run: owner pid %d ended; stopping pid %d's scope and exiting 129\n",
					callerID.PID, o.procs["root"].PID)
				o.stderr.waitFor(t, want)
				if r := runCLI(t, "--ledger", o.led, "ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
					t.Errorf("rows left: %s", r.stdout)
				}
			})
		}
	}
}

func endCaller(p *testproc.Proc, end string) {
	switch end {
	case "SIGKILL":
		p.Process.Signal(syscall.SIGKILL)
	case "SIGTERM":
		p.Process.Signal(syscall.SIGTERM)
	default:
		p.Stdin().Write([]byte("exit\n"))
	}
}

// TestRunDiesWithCallerAsUser: the same, as an ordinary user whose cgroup is not writable: the
// child's scope is its process group. The setsid child leaves the group, and is not covered on
// this path (a descendant that leaves its group escapes it): only the group, the double-forked
// descendant in it, and custody run itself are asserted gone.
func TestRunDiesWithCallerAsUser(t *testing.T) {
	testproc.RequireRoot(t) // to become the ordinary user
	for _, lang := range []string{"python", "node"} {
		t.Run(lang, func(t *testing.T) {
			o := startOwnedTree(t, lang, true)
			awaitRow(t, o.led, strconv.Itoa(o.procs["root"].PID))
			if b, err := os.ReadFile(o.led); err != nil || !strings.Contains(string(b), `"containment":"process-group"`) {
				t.Fatalf("ledger %s (%v); want the child on the process-group path", b, err)
			}
			endCaller(o.caller, "SIGKILL")
			all := o.all()
			delete(all, "setsid")
			awaitGone(t, lang+" caller SIGKILL as uid 65534", all)
			killID(o.procs["setsid"]) // which holds the caller's output: then its Wait ends
			o.caller.Wait()
		})
	}
}

// TestRunOwnerSelf: with --owner self the caller's death leaves the tree running: custody run is
// re-parented, still runs with its child and its row, until the test stops the child by its row.
func TestRunOwnerSelf(t *testing.T) {
	o := startOwnedTree(t, "python", false, "--owner", "self")
	pythonPID := o.caller.Process.Pid
	endCaller(o.caller, "SIGKILL") // reaped at cleanup: its output is the tree's, which lives on
	testproc.WaitFor(t, 10*time.Second, func() error {
		inc, err := procid.Read(o.custody.PID)
		if err != nil || inc.PPID == pythonPID {
			return fmt.Errorf("custody run %v: parent %d (%v); want it re-parented", o.custody, inc.PPID, err)
		}
		return nil
	})
	// A round trip of the ledger after the re-parenting: an owner taken for the parent would have
	// been seen ending by now, and its stop begun.
	r := runCLI(t, "--ledger", o.led, "ps", "--json")
	for role, id := range o.all() {
		if err := id.Verify(); err != nil {
			t.Errorf("--owner self: %s %v ended with the caller: %v", role, id, err)
		}
	}
	if !strings.Contains(r.stdout, fmt.Sprintf(`"pid":%d`, o.procs["root"].PID)) || strings.Contains(r.stdout, "caller_pid") {
		t.Errorf("--owner self: the row, with no caller: %s", r.stdout)
	}
	if r := runCLI(t, "--ledger", o.led, "stop", "--grace", "1s", strconv.Itoa(o.procs["root"].PID)); r.code != 0 {
		t.Errorf("stop: %+v", r)
	}
	awaitGone(t, "stopped by its row", o.all())
	if o.stderr.count("ended") != 0 {
		t.Errorf("--owner self said that an owner ended")
	}
}

// TestRunOwnerPID: --owner PID serves that process (one started before custody run, as a caller
// behind a wrapper is): its death ends the tree, and custody run exits 129, saying so.
func TestRunOwnerPID(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	owner := testproc.Start(t, exec.Command("cat"))
	ownerID := readID(t, owner.Process.Pid)
	led := ledgerPath(t)
	cmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--grace", "1s", "--owner", strconv.Itoa(ownerID.PID), "--",
		"sh", "-c", "setsid sh -c 'echo escaped $$; exec sleep 1000' & (sleep 1000 & echo orphan $!) ; echo child $$; exec cat")
	cmd.Env = append(cmd.Env, mark)
	errs := &screen{}
	cmd.Stderr = errs
	p := testproc.Start(t, cmd)
	ids := map[string]procid.ID{"custody run": readID(t, p.Process.Pid)}
	for len(ids) < 4 { // the three lines come in any order
		role, pid, _ := strings.Cut(p.Line(10*time.Second), " ")
		ids[role] = readID(t, atoi(pid))
	}
	t.Cleanup(func() {
		for _, id := range ids {
			killID(id)
		}
	})
	awaitRow(t, led, strconv.Itoa(ids["child"].PID))
	r := runCLI(t, "--ledger", led, "ps")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !slices.Equal(strings.Fields(lines[0])[3:5], []string{"OWNER", "CALLER"}) ||
		!slices.Equal(strings.Fields(lines[1])[3:5], []string{strconv.Itoa(ids["custody run"].PID), strconv.Itoa(ownerID.PID)}) {
		t.Errorf("ps shows no OWNER %d and CALLER %d:\n%s", ids["custody run"].PID, ownerID.PID, r.stdout)
	}
	owner.Process.Kill()
	owner.Wait()
	if code := exitCodeOf(p.Wait()); code != 129 {
		t.Errorf("custody run after its owner's death: exit %d, want 129", code)
	}
	want := fmt.Sprintf("custody: run: owner pid %d ended; stopping pid %d's scope and exiting 129\n", ownerID.PID, ids["child"].PID)
	if errs.b.String() != want {
		t.Errorf("stderr %q, want %q", errs.b.String(), want)
	}
	awaitGone(t, "the owner SIGKILLed", ids)
}

// TestRunOwnerRefused: --owner of no process, of a process that exited, or in any form but
// parent, self and a PID: one line, and the ledger as it was.
func TestRunOwnerRefused(t *testing.T) {
	led := ledgerPath(t)
	if r := runCLI(t, "--ledger", led, "register", "--pid", strconv.Itoa(cat(t))); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	before, err := os.ReadFile(led)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		owner string
		code  int
	}{
		{strconv.Itoa(dead.Process.Pid), 1}, {"0", 2}, {"-1", 2}, {"+1", 2}, {"01", 2}, {" 1", 2},
		{"Parent", 2}, {"", 2}, {"1x", 2}, {"4294967297", 2},
	} {
		for _, verb := range [][]string{{"run", "--owner", tc.owner, "--", "true"}, {"adopt", "--owner", tc.owner, "v1.x"}} {
			r := runCLI(t, append([]string{"--ledger", led}, verb...)...)
			checkOneLineError(t, strings.Join(verb, " "), r, tc.code)
			if after, _ := os.ReadFile(led); string(after) != string(before) {
				t.Errorf("%q: the ledger changed", verb)
			}
		}
	}
}

// TestRunOwnerReused: in a PID namespace, the owner named by PID exits and a process started after
// custody run receives its PID: custody run refuses it (a PID recycled is not the owner meant),
// in one line, exit 1, writing nothing.
func TestRunOwnerReused(t *testing.T) {
	testproc.RequireRoot(t)
	cmd := testproc.Helper(t, "owner-reuse", filepath.Join(t.TempDir(), "state", "spawn-ledger.json"))
	testproc.NewPIDNamespace(cmd)
	p := testproc.Start(t, cmd)
	if f := p.Expect("result ", 60*time.Second); f[0] != "ok" {
		t.Fatalf("in the PID namespace: %s", strings.Join(f, " "))
	}
}

// helperOwnerReuse runs as PID 1 of a new PID namespace.
func helperOwnerReuse(args []string) int {
	result := func(format string, a ...any) int {
		fmt.Printf("result "+format+"\n", a...)
		return 0
	}
	if err := testproc.MountProc(); err != nil {
		return result("mount proc: %v", err)
	}
	led := args[0]
	meant, meantIn := startCat(false)
	// custody run's process exists from here (a shell, which execs it once told the owner's
	// PID): its start is the shell's.
	exe, _ := os.Executable()
	sh := exec.Command("sh", "-c", `read pid; exec "$0" --ledger "$1" run --owner "$pid" -- true`, exe, led)
	sh.Env = append(os.Environ(), testproc.Env("custody"))
	var stderr strings.Builder
	sh.Stderr = &stderr
	shIn, _ := sh.StdinPipe()
	if err := sh.Start(); err != nil {
		return result("start sh: %v", err)
	}
	shInc, err := procid.Read(sh.Process.Pid)
	if err != nil {
		return result("read sh: %v", err)
	}
	incMeant, _ := procid.Read(meant.Process.Pid)
	meantIn.Close()
	meant.Wait()
	stranger, err := testproc.ReusePID(incMeant.PID, max(shInc.Start, incMeant.Start), func() (*exec.Cmd, error) {
		b := exec.Command("cat")
		b.Stdin = os.Stdin // this helper's lifeline
		return b, b.Start()
	})
	if err != nil {
		return result("reuse pid %d: %v", incMeant.PID, err)
	}
	defer func() { stranger.Process.Kill(); stranger.Wait() }()
	fmt.Fprintf(shIn, "%d\n", incMeant.PID)
	shIn.Close()
	err = sh.Wait()
	var ee *exec.ExitError
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	switch {
	case !errors.As(err, &ee) || ee.ExitCode() != 1:
		return result("custody run --owner %d (reused): %v, stderr %q; want exit 1", incMeant.PID, err, stderr.String())
	case len(lines) != 1 || !strings.Contains(lines[0], "its pid was reused"):
		return result("stderr %q; want one line saying the pid was reused", stderr.String())
	}
	if _, err := os.Stat(filepath.Dir(led)); !errors.Is(err, os.ErrNotExist) {
		return result("the ledger's directory was made: %v", err)
	}
	return result("ok")
}

// grantedChild starts custody run with a child that writes its grant, and returns the child, the
// grant, and the giver.
func grantedChild(t *testing.T, led string) (procid.ID, string, *testproc.Proc) {
	t.Helper()
	dir := testproc.TempDir(t)
	life := fifoLifeline(t, dir)
	granted := filepath.Join(dir, "grant")
	exe, _ := os.Executable()
	giverCmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--grace", "1s", "--grant-env", "HANDOFF", "--",
		"env", testproc.Env("grantee"), exe, "HANDOFF", granted, life)
	giverErr, err := os.Create(filepath.Join(dir, "giver-stderr")) // a file: the child outlives the giver
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { giverErr.Close() })
	giverCmd.Stderr = giverErr
	giver := testproc.Start(t, giverCmd)
	var got []string
	testproc.WaitFor(t, 30*time.Second, func() error {
		b, err := os.ReadFile(granted)
		got = strings.Fields(string(b))
		return err
	})
	if len(got) != 2 {
		t.Fatalf("the child's grant file: %q", got)
	}
	child := incarnationOf(t, got[0])
	t.Cleanup(func() { killID(child) })
	return child, got[1], giver
}

// receipt returns the one row of the ledger after a transfer.
func receipt(t *testing.T, led string) map[string]any {
	t.Helper()
	var rows []map[string]any
	r := runCLI(t, "--ledger", led, "ps", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("ps --json: %v %q", err, r.stdout)
	}
	return rows[0]
}

// TestAdoptDiesWithOwner: custody adopt --owner PID records that owner in the receipt (replacing
// the giver's caller) and, when it dies, stops the adopted child and exits 129, saying so.
func TestAdoptDiesWithOwner(t *testing.T) {
	led := ledgerPath(t)
	owner := testproc.Start(t, exec.Command("cat"))
	ownerID := readID(t, owner.Process.Pid)
	child, grant, giver := grantedChild(t, led)
	recvCmd := testproc.Helper(t, "custody", "--ledger", led, "adopt", "--grace", "1s", "--owner", strconv.Itoa(ownerID.PID), grant)
	errs := &screen{}
	recvCmd.Stderr = errs
	receiver := testproc.Start(t, recvCmd)
	if err := giver.Wait(); err != nil {
		t.Fatalf("giver: %v", err)
	}
	if row := receipt(t, led); row["owner"] != float64(receiver.Process.Pid) || row["caller_pid"] != float64(ownerID.PID) ||
		row["caller_start_ticks"] != float64(ownerID.Start) {
		t.Errorf("the receipt: owner %v, caller %v@%v; want %d, %v", row["owner"], row["caller_pid"],
			row["caller_start_ticks"], receiver.Process.Pid, ownerID)
	}
	owner.Process.Kill()
	owner.Wait()
	if code := exitCodeOf(receiver.Wait()); code != 129 {
		t.Errorf("adopt after its owner's death: exit %d, want 129", code)
	}
	if want := fmt.Sprintf("custody: adopt: owner pid %d ended; stopping pid %d's scope", ownerID.PID, child.PID); !strings.Contains(errs.b.String(), want) {
		t.Errorf("adopt's stderr %q, want %q", errs.b.String(), want)
	}
	awaitGone(t, "the adopter's owner SIGKILLed", map[string]procid.ID{"adopted child": child})
}

// TestAdoptOwnerSelf: a receipt by custody adopt --owner self names no caller: the giver's (this
// test, custody run's parent) goes with the giver.
func TestAdoptOwnerSelf(t *testing.T) {
	led := ledgerPath(t)
	child, grant, giver := grantedChild(t, led)
	awaitRow(t, led, strconv.Itoa(child.PID)) // the child runs before its row is written
	if c := receipt(t, led)["caller_pid"]; c != float64(os.Getpid()) {
		t.Fatalf("the giver's row: caller %v, want this test, %d", c, os.Getpid())
	}
	receiver := testproc.Start(t, testproc.Helper(t, "custody", "--ledger", led, "adopt", "--grace", "1s", "--owner", "self", grant))
	if err := giver.Wait(); err != nil {
		t.Fatalf("giver: %v", err)
	}
	if row := receipt(t, led); row["owner"] != float64(receiver.Process.Pid) || row["caller_pid"] != nil || row["caller_start_ticks"] != nil {
		t.Errorf("the receipt by --owner self: %v; want owner %d and no caller", row, receiver.Process.Pid)
	}
}
