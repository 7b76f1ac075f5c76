package custody_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.Register("pnode", helperPNode) }

// envPTwoLevels, set in the tree's environment, puts a second nested owner (PV) below PW.
const envPTwoLevels = "CUSTODY_TEST_PNODE_TWO_LEVELS"

// helperPNode is one process of a process-group tree, by role, printing node lines as helperNode:
//
//	PR  owner of PW; prints "node PRsup <pid> <start>" (its supervisor) and "node nest <path>"
//	PW  nested owner of PM (of PV when $CUSTODY_TEST_PNODE_TWO_LEVELS is set); prints
//	    "node PWsup <pid> <start>"; stops its child when the test drops <dir>/teardown, then
//	    prints "node W-torn <outcome>"
//	PV  nested owner of PM, one level further down; prints "node PVsup <pid> <start>"
//	PM  starts PG in its own group, not owned
//	PG  a leaf
func helperPNode(args []string) int {
	role := args[0]
	if err := pnode(role); err != nil {
		fmt.Println("error", role, err)
		return 1
	}
	return 0
}

func pnode(role string) error {
	me, err := procid.Self()
	if err != nil {
		return err
	}
	fmt.Printf("node %s %d %d\n", role, me.PID, me.Start)
	switch role {
	case "PR":
		o := nodeOwner()
		if _, err := o.Start(context.Background(), pnodeCmd("PW"), custody.StartOptions{Purpose: "serve"}); err != nil {
			return err
		}
		if err := printSupervisor("PRsup", o.Supervisor); err != nil {
			return err
		}
		fmt.Println("node nest", o.Supervisor.NestSocket())
	case "PW", "PV":
		next := "PM"
		if role == "PW" && os.Getenv(envPTwoLevels) != "" {
			next = "PV"
		}
		o := nodeOwner()
		c, err := o.Start(context.Background(), pnodeCmd(next), custody.StartOptions{Purpose: "serve"})
		if err != nil {
			return err
		}
		if err := printSupervisor(role+"sup", o.Supervisor); err != nil {
			return err
		}
		if role == "PV" {
			break
		}
		awaitMark(filepath.Join(os.Getenv(envNodeDir), "teardown"))
		fmt.Println("node W-torn", c.Stop(context.Background(), stop.Options{Grace: time.Second}).Outcome)
	case "PM":
		cmd := pnodeCmd("PG")
		if err := cmd.Start(); err != nil {
			return err
		}
		go cmd.Wait()
	}
	var b [1]byte
	os.Stdin.Read(b[:]) // the lifeline: EOF when the test ends
	return nil
}

func printSupervisor(role string, c *supervise.Client) error {
	inc, err := procid.Read(c.PID())
	if err != nil {
		return err
	}
	fmt.Printf("node %s %d %d\n", role, inc.PID, inc.Start)
	return nil
}

func awaitMark(mark string) {
	for {
		if _, err := os.Stat(mark); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond) // a helper waiting for the test's cue, not a test's sync
	}
}

func pnodeCmd(role string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], role)
	cmd.Env = append(os.Environ(), testproc.Env("pnode"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd
}

// startPTree starts the process-group tree PR → PW → PM → PG, with process-group containment
// forced, and reads its nodes.
func startPTree(t *testing.T) *tree { return startPTreeOf(t, false) }

// startPTreeOf starts the tree, with PV between PW and PM when twoLevels is set.
func startPTreeOf(t *testing.T, twoLevels bool) *tree {
	t.Helper()
	dir := t.TempDir()
	cmd := testproc.Helper(t, "pnode", "PR")
	cmd.Env = append(cmd.Env, envNodeLedger+"="+filepath.Join(dir, "spawn-ledger.json"), envNodeDir+"="+dir,
		scope.EnvContainment+"=process-group")
	nodes := []string{"PR", "PRsup", "PW", "PWsup", "PM", "PG"}
	if twoLevels {
		cmd.Env = append(cmd.Env, envPTwoLevels+"=1")
		nodes = append(nodes, "PV", "PVsup")
	}
	cmd.WaitDelay = 10 * time.Second
	tr := &tree{p: testproc.Start(t, cmd), dir: dir, nodes: map[string]procid.ID{}}
	tr.next = func(t *testing.T) []string { return tr.p.Expect("", 30*time.Second) }
	tr.read(t, nodes...)
	if !tr.hasPrefix("nest ") {
		tr.read(t, "nest "+tr.nestPath(t))
	}
	return tr
}

func (tr *tree) hasPrefix(p string) bool {
	for k := range tr.nodes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// nestPath reads lines until PR's nest socket is known, and returns it.
func (tr *tree) nestPath(t *testing.T) string {
	t.Helper()
	for {
		for k := range tr.nodes {
			if p, ok := strings.CutPrefix(k, "nest "); ok {
				return p
			}
		}
		f := tr.next(t)
		if len(f) == 3 && f[0] == "node" && f[1] == "nest" {
			tr.nodes["nest "+f[2]] = procid.ID{}
		}
	}
}

// kill sends sig to a node after proving it is still the node read.
func (tr *tree) kill(t *testing.T, role string, sig syscall.Signal) {
	t.Helper()
	id := tr.nodes[role]
	if err := id.Verify(); err != nil {
		t.Fatalf("node %s (%v): %v", role, id, err)
	}
	if err := syscall.Kill(id.PID, sig); err != nil {
		t.Fatalf("signal node %s: %v", role, err)
	}
}

// Two nested levels, PR → PW → PV → PM → PG: PV registers PM's group with PW's supervisor and
// with PR's. With PW, PV and both their supervisors killed, PR's SIGKILL still kills PM and PG;
// had PV named PW's supervisor alone, nothing alive would cover them any more.
func TestNestedGroupsDieWithOutermostOwner(t *testing.T) {
	tr := startPTreeOf(t, true)
	for _, n := range []string{"PW", "PV"} { // stopped: no replacement of their supervisors
		tr.kill(t, n, syscall.SIGSTOP)
	}
	tr.kill(t, "PWsup", syscall.SIGKILL)
	tr.kill(t, "PVsup", syscall.SIGKILL)
	tr.gone(t, "PWsup", "PVsup")
	tr.kill(t, "PV", syscall.SIGKILL)
	tr.kill(t, "PW", syscall.SIGKILL)
	tr.gone(t, "PW", "PV")
	tr.alive(t, "PR", "PM", "PG") // only PR's supervisor covers them now
	tr.p.Process.Signal(syscall.SIGKILL)
	tr.p.Process.Wait()
	tr.gone(t, "PM", "PG", "PRsup")
}

// On the process-group path a nested owner registers its groups with the outer owner's
// supervisor: with the nested owner and its own supervisor killed, the outer owner's SIGKILL
// still kills the nested owner's server and the server's child.
func TestNestedGroupsDieWithOuterOwner(t *testing.T) {
	tr := startPTree(t)
	tr.kill(t, "PW", syscall.SIGSTOP) // no replacement of its supervisor
	tr.kill(t, "PWsup", syscall.SIGKILL)
	tr.gone(t, "PWsup")
	tr.kill(t, "PW", syscall.SIGKILL)
	tr.gone(t, "PW")
	tr.alive(t, "PR", "PM", "PG") // only PR's supervisor covers them now
	tr.p.Process.Signal(syscall.SIGKILL)
	tr.p.Process.Wait()
	tr.gone(t, "PM", "PG", "PRsup")
}

// The nested owner's teardown kills its server and the server's child, and nothing outside it.
func TestNestedGroupsTeardown(t *testing.T) {
	tr := startPTree(t)
	if err := os.WriteFile(filepath.Join(tr.dir, "teardown"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tr.read(t, "W-torn exited")
	tr.gone(t, "PM", "PG")
	tr.alive(t, "PR", "PRsup", "PW", "PWsup")
}

// A process outside the outer owner's groups that registers a group on the nest socket is refused,
// and the outer owner's death signals nothing of it.
func TestNestedRegistrationRefusedOutsideScope(t *testing.T) {
	tr := startPTree(t)
	victim := exec.Command("sleep", "60")
	victim.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
	inc, err := procid.Read(victim.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", tr.nestPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "register %d %d %d\n", inc.PID, inc.PID, inc.Start)
	var answer [16]byte
	n, err := c.Read(answer[:])
	if got := string(answer[:n]); got != "refused\n" {
		t.Fatalf("answer %q (%v); want refused", got, err)
	}
	tr.p.Process.Signal(syscall.SIGKILL)
	tr.p.Process.Wait()
	tr.gone(t, "PRsup", "PW", "PM", "PG")
	if err := inc.ID.Verify(); err != nil {
		t.Fatalf("the stranger's group was signalled: %v", err)
	}
}
