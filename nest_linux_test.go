package custody_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.Register("node", helperNode) }

// Environment of the node helpers: the ledger their owners share, and a directory where the test
// drops a "teardown" file for W.
const (
	envNodeLedger = "CUSTODY_TEST_NODE_LEDGER"
	envNodeDir    = "CUSTODY_TEST_NODE_DIR"
)

// helperNode is one process of a tree, by role. Each prints "node <role> <pid> <start>" to the
// stdout it shares with the whole tree; each reads the test's lifeline on stdin or blocks.
//
//	R  owner of B                   B  owner of S and W
//	W  owner of M; stops M when the test drops <dir>/teardown, then prints "node W-torn <outcome>"
//	M  starts G in a new session (setsid), not owned
//	Og owner of K                   K  starts S in its own group, not owned
//	O  owner of E                   E  starts three escapees, not owned:
//	x-setsid (a new session), x-setpgid (a new group), and x-fork (double-forked through F,
//	which exits at once)
//	S, G, x-*  leaves
func helperNode(args []string) int {
	role := args[0]
	if err := node(role); err != nil {
		fmt.Println("error", role, err)
		return 1
	}
	return 0
}

func node(role string) error {
	me, err := procid.Self()
	if err != nil {
		return err
	}
	fmt.Printf("node %s %d %d\n", role, me.PID, me.Start)
	switch role {
	case "R":
		_, err = ownNodes("B")
	case "B":
		_, err = ownNodes("S", "W")
	case "O":
		_, err = ownNodes("E")
	case "Og":
		_, err = ownNodes("K")
	case "K":
		err = startNode("S", nil)
	case "W":
		return teardownWhenAsked()
	case "M":
		err = startNode("G", &syscall.SysProcAttr{Setsid: true})
	case "E":
		err = startEscapees()
	case "F":
		return startNode("x-fork", &syscall.SysProcAttr{Setsid: true})
	}
	if err != nil {
		return err
	}
	var b [1]byte
	os.Stdin.Read(b[:]) // the lifeline: EOF when the test ends
	return nil
}

func startEscapees() error {
	for _, e := range []struct {
		role string
		attr *syscall.SysProcAttr
	}{{"x-setsid", &syscall.SysProcAttr{Setsid: true}}, {"x-setpgid", &syscall.SysProcAttr{Setpgid: true}}, {"F", nil}} {
		if err := startNode(e.role, e.attr); err != nil {
			return err
		}
	}
	return nil
}

// nodeCmd returns a node helper's command, sharing this process's stdin and stdout.
func nodeCmd(role string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], role)
	cmd.Env = append(os.Environ(), testproc.Env("node"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd
}

// startNode starts a node that is not owned, and does not wait for it (F's child is reparented).
func startNode(role string, attr *syscall.SysProcAttr) error {
	cmd := nodeCmd(role)
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait()
	return nil
}

func nodeOwner() *custody.Owner {
	return &custody.Owner{Ledger: ledger.Open(os.Getenv(envNodeLedger)), Supervisor: &supervise.Client{Grace: time.Second}}
}

// ownNodes starts each role as an owned child of one owner.
func ownNodes(roles ...string) ([]*custody.Child, error) {
	o := nodeOwner()
	var cs []*custody.Child
	for _, role := range roles {
		c, err := o.Start(context.Background(), nodeCmd(role), custody.StartOptions{Purpose: "serve"})
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// teardownWhenAsked is W: it owns M, and stops it when the test asks.
func teardownWhenAsked() error {
	cs, err := ownNodes("M")
	if err != nil {
		return err
	}
	mark := filepath.Join(os.Getenv(envNodeDir), "teardown")
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond) // a helper waiting for the test's cue, not a test's sync
	}
	res := cs[0].Stop(context.Background(), stop.Options{Grace: time.Second})
	fmt.Println("node W-torn", res.Outcome)
	var b [1]byte
	os.Stdin.Read(b[:])
	return nil
}

// tree is a started node tree as the test sees it.
type tree struct {
	p     *testproc.Proc
	dir   string
	nodes map[string]procid.ID
	next  func(t *testing.T) []string // the next line's fields
}

// startTree starts a node helper (the root of a tree) and reads nodes until want are all there.
func startTree(t *testing.T, root string, want ...string) *tree {
	t.Helper()
	dir := t.TempDir()
	cmd := testproc.Helper(t, "node", root)
	cmd.Env = append(cmd.Env, envNodeLedger+"="+filepath.Join(dir, "spawn-ledger.json"), envNodeDir+"="+dir)
	cmd.WaitDelay = 10 * time.Second // bounds the wait for a surviving descendant's stdout: a failure
	tr := &tree{p: testproc.Start(t, cmd), dir: dir, nodes: map[string]procid.ID{}}
	tr.next = func(t *testing.T) []string { return tr.p.Expect("", 30*time.Second) }
	tr.read(t, append(want, root)...)
	return tr
}

// readFrom reads node lines from out until every role in want was seen.
func (tr *tree) readFrom(t *testing.T, out io.Reader, want ...string) {
	t.Helper()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	tr.next = func(t *testing.T) []string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the tree's stdout closed")
			}
			return strings.Fields(l)
		case <-time.After(30 * time.Second):
			t.Fatal("no line from the tree in 30s")
		}
		return nil
	}
	tr.read(t, want...)
}

// read reads node lines until every role in want was seen.
func (tr *tree) read(t *testing.T, want ...string) {
	t.Helper()
	for !tr.has(want...) {
		f := tr.next(t)
		switch {
		case len(f) > 0 && f[0] == "error":
			t.Fatalf("node: %v", f)
		case len(f) == 4 && f[0] == "node":
			pid, _ := strconv.Atoi(f[2])
			start, _ := strconv.ParseUint(f[3], 10, 64)
			tr.nodes[f[1]] = procid.ID{PID: pid, Start: start}
		case len(f) == 3 && f[0] == "node":
			tr.nodes[f[1]+" "+f[2]] = procid.ID{}
		}
	}
}

func (tr *tree) has(roles ...string) bool {
	for _, r := range roles {
		if _, ok := tr.nodes[r]; !ok {
			return false
		}
	}
	return true
}

// gone waits until every named node has exited.
func (tr *tree) gone(t *testing.T, roles ...string) {
	t.Helper()
	testproc.WaitFor(t, 20*time.Second, func() error {
		for _, r := range roles {
			if err := tr.nodes[r].Verify(); err == nil {
				return fmt.Errorf("node %s (%v) still runs", r, tr.nodes[r])
			}
		}
		return nil
	})
}

// alive checks that every named node still runs.
func (tr *tree) alive(t *testing.T, roles ...string) {
	t.Helper()
	for _, r := range roles {
		if err := tr.nodes[r].Verify(); err != nil {
			t.Errorf("node %s (%v): %v; want it alive", r, tr.nodes[r], err)
		}
	}
}

func requireCgroups(t *testing.T) {
	t.Helper()
	if kind, _, why := scope.Containment(); kind != scope.KindCgroup {
		testproc.Skip(t, "no cgroup containment for this process: %v", why)
	}
}

var escapees = []string{"E", "x-setsid", "x-setpgid", "x-fork"}

// A descendant that calls setsid, setpgid into a new group, or double-forks, dies with its
// owner's SIGKILL: the supervisor kills the owner's cgroups.
func TestEscapeesDieWithOwner(t *testing.T) {
	requireCgroups(t)
	tr := startTree(t, "O", escapees...)
	tr.p.Process.Signal(syscall.SIGKILL)
	tr.p.Process.Wait()
	tr.gone(t, escapees...)
}

// The same descendants die with a stop, by the owner and by another process from the row.
func TestEscapeesDieWithStop(t *testing.T) {
	requireCgroups(t)
	for _, by := range []string{"owner", "row"} {
		t.Run(by, func(t *testing.T) {
			o := newOwner(t)
			cmd := testproc.Helper(t, "node", "E")
			r, w, err := os.Pipe() // the tree's lifeline, held by the test
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
			cmd.Stdin = r
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			c, err := o.Start(context.Background(), cmd, custody.StartOptions{Purpose: "serve"})
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Signal(os.Kill); c.Wait() })
			tr := &tree{nodes: map[string]procid.ID{}}
			tr.readFrom(t, out, escapees...)
			var res stop.Result
			if by == "owner" {
				res = c.Stop(context.Background(), stop.Options{Grace: time.Second})
			} else {
				rows, err := o.Ledger.Rows(context.Background())
				if err != nil || len(rows) != 1 {
					t.Fatalf("rows %v, %v", rows, err)
				}
				res = stop.Recorded(context.Background(), rows[0].Record(), rows[0].ScopeDesc(), stop.Options{Grace: time.Second})
			}
			if res.Outcome != stop.Exited {
				t.Fatalf("stop: %+v; want exited", res)
			}
			// exited means the whole scope was empty: no escapee may be seen alive now.
			for _, r := range escapees {
				if err := tr.nodes[r].Verify(); err == nil {
					t.Errorf("stop said exited, but %s (%v) runs", r, tr.nodes[r])
				}
			}
		})
	}
}

// The MCP-watchdog witness: R owns B; B owns a sibling S and a nested owner W; W owns a server M,
// whose grandchild G calls setsid. W's teardown of M kills M and G and nothing else; R's SIGKILL
// then kills everything left.
func TestNestedOwners(t *testing.T) {
	requireCgroups(t)
	all := []string{"B", "S", "W", "M", "G"}
	tr := startTree(t, "R", all...)
	if err := os.WriteFile(filepath.Join(tr.dir, "teardown"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tr.read(t, "W-torn exited")
	tr.gone(t, "M", "G")
	tr.alive(t, "R", "B", "S", "W")
	tr.p.Process.Signal(syscall.SIGKILL)
	tr.p.Process.Wait()
	tr.gone(t, all...)
}

// Hundreds of owners SIGKILLed at random instants during their first Start: nothing they started
// survives, on the cgroup path (the child is born covered) and on the process-group path (the
// child waits at its gate until covered). Every process of one round carries the round's token in
// its environment; after the kill, no process may carry it. On the process-group path the tree
// stays in the child's group (a group cannot hold escapees).
func TestOwnerKilledDuringStart(t *testing.T) {
	for _, c := range []struct{ containment, root string }{{"cgroup", "O"}, {"process-group", "Og"}} {
		t.Run(c.containment, func(t *testing.T) {
			if c.containment == "cgroup" {
				requireCgroups(t)
			}
			t.Setenv(scope.EnvContainment, c.containment)
			killDuringStart(t, c.root)
		})
	}
}

func killDuringStart(t *testing.T, root string) {
	rounds := 100 // per path
	if testing.Short() {
		rounds = 20
	}
	for i := range rounds {
		token := fmt.Sprintf("%d-%s-%d", os.Getpid(), root, i)
		cmd := testproc.Helper(t, "node", root)
		cmd.Env = append(cmd.Env, envNodeLedger+"="+filepath.Join(t.TempDir(), "l.json"), "CUSTODY_TEST_TOKEN="+token)
		cmd.Stdout, cmd.Stderr = nil, nil
		r, w, err := os.Pipe() // the tree's lifeline, held by the test
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = r
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond) // the random instant
		cmd.Process.Kill()
		cmd.Wait()
		testproc.WaitFor(t, 20*time.Second, func() error { return noneCarry("CUSTODY_TEST_TOKEN=" + token) })
		w.Close()
		removeLeftovers(t, cmd.Process.Pid)
	}
}

// removeLeftovers removes the empty cgroups a killed owner left, as a reap would: its directory
// when it died before its first scope was covered, which its supervisor, covering nothing, does
// not know of. (An owner that had covered a scope leaves nothing: its supervisor removes the rest
// of its directory.) Its supervisor has exited (it carried the round's token): nothing else
// removes them meanwhile.
func removeLeftovers(t *testing.T, owner int) {
	ls, err := scope.Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Owner.PID == owner {
			if err := scope.RemoveLeftover(l); err != nil {
				t.Errorf("owner %d's leftover %s: %v", owner, l.Cgroup, err)
			}
		}
	}
}

// On the process-group path a child runs none of its program before it is covered: a start that
// fails at the coverage step leaves a child that never ran.
func TestGateHoldsUntilCovered(t *testing.T) {
	t.Setenv(scope.EnvContainment, "process-group")
	mark := filepath.Join(t.TempDir(), "ran")
	o := newOwner(t)
	t.Run("uncovered", func(t *testing.T) {
		custody.FailStartAt(t, "cover", errors.New("no coverage"))
		_, err := o.Start(context.Background(), exec.Command("sh", "-c", "touch "+mark), custody.StartOptions{})
		if err == nil {
			t.Fatal("start succeeded without coverage")
		}
		// Start killed and reaped the child before it returned: it ran or it never will.
		if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the child ran before it was covered (%v)", err)
		}
	})
	c, err := o.Start(context.Background(), exec.Command("sh", "-c", "touch "+mark), custody.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the covered child did not run: %v", err)
	}
}

// noneCarry fails while some process's environment holds kv.
func noneCarry(kv string) error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for v := range strings.SplitSeq(string(b), "\x00") {
			if v == kv {
				if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && isZombie(st) {
					break
				}
				comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
				return fmt.Errorf("pid %d (%s) survived its owner (%s)", pid, strings.TrimSpace(string(comm)), kv)
			}
		}
	}
	return nil
}

func isZombie(stat []byte) bool {
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
