package scope_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

func init() { testproc.Register("tree", helperTree) }

// TestMain removes, after the tests, the directory of cgroup scopes they made: no owner closes
// it here, and an empty directory of a dead owner is a leftover for a reap.
func TestMain(m *testing.M) { testproc.Main(m, scope.ReleaseOwnerDir) }

// helperTree is one node of a process tree. It starts a child node when -depth > 0 (the same
// helper: the child inherits the environment that names it), waits for its "ready" line, and
// reports "ready <pid> <start> …" for itself and every node below it, the test's view of the
// tree. Every node's stdin is the test's pipe, shared down the tree: the lifeline, so a node
// outlives its parent's death but not the test. Flags:
//
//	-depth N    nodes below this one
//	-mark FILE  create FILE first thing: it shows the node ran
//	-setsid     start the child in a new session (Unix): it leaves this node's process group
//	-scope      start the child with scope.Prepare and scope.Attach: this node is its owner
func helperTree(args []string) int {
	fs := flag.NewFlagSet("tree", flag.ContinueOnError)
	depth := fs.Int("depth", 0, "nodes below this one")
	mark := fs.String("mark", "", "file to create first")
	setsid := fs.Bool("setsid", false, "start the child in a new session")
	withScope := fs.Bool("scope", false, "own the child's scope")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *mark != "" {
		if err := os.WriteFile(*mark, nil, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	self, err := procid.Self()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	report := []string{strconv.Itoa(self.PID), strconv.FormatUint(self.Start, 10)}
	var cmd *exec.Cmd
	var s *scope.Scope
	if *depth > 0 {
		if cmd, s, err = startNode(*depth-1, *setsid, *withScope, &report); err != nil {
			fmt.Fprintln(os.Stderr, "tree:", err)
			return 1
		}
	}
	fmt.Println("ready " + strings.Join(report, " "))
	io.Copy(io.Discard, os.Stdin)
	if s != nil {
		s.Close()
	}
	if cmd != nil {
		cmd.Wait()
	}
	return 0
}

// startNode starts the child node and appends its report to report.
func startNode(depth int, setsid, withScope bool, report *[]string) (*exec.Cmd, *scope.Scope, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe, "-depth", strconv.Itoa(depth))
	cmd.Stdin = os.Stdin
	// An escapee's stderr would hold the test's stderr pipe, and so its Wait for the escapee's
	// parent, open.
	if !setsid {
		cmd.Stderr = os.Stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if setsid {
		detach(cmd)
	}
	var prep *scope.Prepared
	if withScope {
		if prep, err = scope.Prepare(cmd); err != nil {
			return nil, nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	var s *scope.Scope
	if withScope {
		if s, err = prep.Attach(); err != nil {
			cmd.Wait()
			return nil, nil, err
		}
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	rest, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		return nil, nil, fmt.Errorf("child said %q: %v", line, err)
	}
	*report = append(*report, strings.Fields(rest)...)
	return cmd, s, nil
}

// tree returns an unstarted tree helper.
func tree(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := testproc.Helper(t, "tree", args...)
	// A race-enabled binary sleeps a second at exit unless told otherwise.
	cmd.Env = append(cmd.Env, "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	// Bounds the Wait for a helper whose stderr a surviving descendant holds: a test failure.
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// startScoped starts a tree helper in a scope of its own. Cleanup stops what is left of it.
func startScoped(t *testing.T, args ...string) (*testproc.Proc, *scope.Scope) {
	t.Helper()
	cmd := tree(t, args...)
	prep, err := scope.Prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, cmd)
	s, err := prep.Attach()
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	t.Cleanup(func() { cleanupScope(s) })
	return p, s
}

// ready reads the tree's "ready" line: the incarnations of its nodes, root first.
func ready(t *testing.T, p *testproc.Proc) []procid.ID {
	t.Helper()
	return testid.Parse(t, p.Expect("ready ", 30*time.Second))
}

// acquire proves authority over a node the test did not start itself.
func acquire(t *testing.T, id procid.ID) *authority.Process {
	t.Helper()
	rec := procid.Record{PID: id.PID, StartTicks: &id.Start}
	if boot, err := procid.BootID(); err == nil {
		rec.BootID = &boot
	}
	p, err := authority.Acquire(rec)
	if err != nil {
		t.Fatalf("acquire %v: %v", id, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// waitExit waits for each process to exit.
func waitExit(t *testing.T, d time.Duration, ps ...*authority.Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for _, p := range ps {
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("pid %d did not exit: %v", p.PID(), err)
		}
	}
}

func mustIs(t *testing.T, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %v: want errors.Is(err, %v)", err, target)
		}
	}
}

func TestPrepareRefusesStarted(t *testing.T) {
	p := testproc.Start(t, tree(t))
	if _, err := scope.Prepare(p.Cmd); err == nil {
		t.Error("Prepare of a started command succeeded")
	}
	p.Expect("ready ", 30*time.Second)
	p.Stdin().Close()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestAttachRefusesUnstarted(t *testing.T) {
	prep, err := scope.Prepare(tree(t))
	if err != nil {
		t.Fatal(err)
	}
	defer prep.Abandon()
	if _, err := prep.Attach(); err == nil {
		t.Error("Attach of an unstarted command succeeded")
	}
}

// A Prepared scope is attached once: a second Attach is refused, and Abandon after the Attach
// leaves the attached scope as it was (its cgroup, where it has one, is not removed).
func TestPreparedAttachOnce(t *testing.T) {
	cmd := tree(t)
	prep, err := scope.Prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, cmd)
	s, err := prep.Attach()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupScope(s) })
	if _, err := prep.Attach(); err == nil {
		t.Error("a second Attach succeeded")
	}
	prep.Abandon()
	p.Expect("ready ", 30*time.Second)
	if empty, err := s.Empty(); err != nil || empty {
		t.Errorf("after Abandon, the attached scope reads empty %v, %v; want its child in it", empty, err)
	}
}

// A child whose preparation was undone before its start (its SysProcAttr replaced) runs outside
// any scope custody could take without a window: Attach refuses it and kills it, rather than
// leave it unowned.
func TestAttachUnpreparedKills(t *testing.T) {
	cmd := tree(t)
	prep, err := scope.Prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = nil
	p := testproc.Start(t, cmd)
	a, err := authority.FromOS(p.Process)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = prep.Attach()
	mustIs(t, err, scope.ErrNotPrepared)
	waitExit(t, 30*time.Second, a)
	if err := p.Wait(); err == nil {
		t.Fatal("the refused child exited successfully; want killed")
	}
}
