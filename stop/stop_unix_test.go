//go:build unix

package stop_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
)

func TestMain(m *testing.M) {
	testproc.Register("child", helperChild)
	testproc.Register("stop-as-nobody", helperStopAsNobody)
	testproc.Register("child-as-nobody", helperChildAsNobody)
	testproc.Main(m)
}

// helperChild is a stop target. Its first argument says how it takes SIGTERM: "exit", "ignore",
// or "slow" (exits 1 s after it). With "member" as second argument it starts a grandchild in its
// own process group first. It prints "ready <pid> [<member pid>]" and then blocks on stdin.
func helperChild(args []string) int {
	switch args[0] {
	case "ignore":
		signal.Ignore(syscall.SIGTERM)
	case "slow":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() { <-c; time.Sleep(time.Second); os.Exit(0) }()
	}
	line := "ready " + strconv.Itoa(os.Getpid())
	if len(args) > 1 && args[1] == "member" {
		m := exec.Command(os.Args[0], "ignore") // same group, ignores TERM too: only KILL ends it
		m.Env = append(os.Environ(), testproc.Env("child"))
		m.Stdin = os.NewFile(3, "lifeline") // the test's second lifeline: it outlives this process
		out, _ := m.StdoutPipe()
		if err := m.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		bufio.NewScanner(out).Scan() // its "ready": TERM is ignored from here on
		line += " " + strconv.Itoa(m.Process.Pid)
	}
	fmt.Println(line)
	bufio.NewScanner(os.Stdin).Scan()
	return 0
}

// helperStopAsNobody drops to uid 65534 and stops the row given as JSON.
// helperChildAsNobody is helperChild running as uid 65534. It drops root's ids itself: the test
// binary lies in a directory only root may enter, so it cannot be started as another user.
func helperChildAsNobody(args []string) int {
	if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(65534), syscall.Setuid(65534)); err != nil {
		fmt.Println("error cannot drop privileges:", err)
		return 1
	}
	return helperChild(args)
}

func helperStopAsNobody(args []string) int {
	if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(65534), syscall.Setuid(65534)); err != nil {
		fmt.Println("skip cannot drop privileges:", err)
		return 0
	}
	row, err := ledger.Reparse([]byte(args[0]))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	opts := stop.Options{Grace: 200 * time.Millisecond}
	if len(args) > 1 { // the uid owning the ledger the row came from
		uid := atoi(args[1])
		opts.Owner = &uid
	}
	res := stop.Recorded(context.Background(), row.Record(), row.ScopeDesc(), opts)
	fmt.Println("outcome", res.Outcome, res.Reason)
	return 0
}

// start runs a child helper in a process group of its own, reaped in the background as its
// owner would, and returns its row (scope pgrp) and the PIDs it reported.
func start(t *testing.T, args ...string) (ledger.Row, []int, *testproc.Proc) {
	t.Helper()
	return startAs(t, "child", args...)
}

// startAs is start with the child helper name: "child", or "child-as-nobody".
func startAs(t *testing.T, name string, args ...string) (ledger.Row, []int, *testproc.Proc) {
	t.Helper()
	cmd := testproc.Helper(t, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild's lifeline, fd 3: it must not close when the child is reaped, as the
	// child's stdin does, or the grandchild would exit on its own and prove nothing.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{r}
	t.Cleanup(func() { w.Close() })
	p := testproc.Start(t, cmd)
	r.Close()
	var pids []int
	for _, f := range p.Expect("ready ", 10*time.Second) {
		pids = append(pids, atoi(f))
	}
	go p.Wait() // the owner reaps; a zombie leader would keep the group non-empty
	inc, err := procid.Read(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	row := ledger.NewRow(inc, procid.Incarnation{})
	row.Scope, row.PGID = string(scope.KindGroup), &inc.PID
	return row, pids, p
}

func gone(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if procid.Exists(pid) {
			if _, err := procid.Read(pid); !errors.Is(err, procid.ErrGone) {
				t.Errorf("pid %d still alive after the stop", pid)
			}
		}
	}
}

func TestOutcomes(t *testing.T) {
	ctx := context.Background()
	t.Run("exits on TERM", func(t *testing.T) {
		row, pids, _ := start(t, "exit")
		res := stop.Recorded(ctx, row.Record(), row.ScopeDesc(), stop.Options{})
		if res.Outcome != stop.Exited || res.Forced {
			t.Errorf("result %+v; want exited without force", res)
		}
		gone(t, pids...)
	})
	t.Run("ignores TERM", func(t *testing.T) {
		row, pids, _ := start(t, "ignore")
		res := stop.Recorded(ctx, row.Record(), row.ScopeDesc(), stop.Options{Grace: 300 * time.Millisecond})
		if res.Outcome != stop.Exited || !res.Forced {
			t.Errorf("result %+v; want exited with force", res)
		}
		gone(t, pids...)
	})
	t.Run("group member ignores TERM", func(t *testing.T) {
		row, pids, _ := start(t, "exit", "member")
		res := stop.Recorded(ctx, row.Record(), row.ScopeDesc(), stop.Options{Grace: 300 * time.Millisecond})
		if res.Outcome != stop.Exited || !res.Forced {
			t.Errorf("result %+v; want exited with force (the member ignores TERM)", res)
		}
		gone(t, pids...)
	})
	t.Run("already exited", func(t *testing.T) {
		row, _, p := start(t, "exit")
		p.Stdin().Close()
		p.Wait()
		if res := stop.Recorded(ctx, row.Record(), row.ScopeDesc(), stop.Options{}); res.Outcome != stop.AlreadyExited {
			t.Errorf("result %+v; want already-exited", res)
		}
	})
	t.Run("timed out, exit seen later", func(t *testing.T) {
		row, pids, p := start(t, "slow")
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		res := stop.Recorded(dctx, row.Record(), row.ScopeDesc(), stop.Options{Grace: 5 * time.Second})
		if res.Outcome != stop.TimedOut || res.Forced {
			t.Errorf("result %+v; want timed-out without force", res)
		}
		if err := p.Wait(); err != nil {
			t.Errorf("the slow child's later exit: %v", err)
		}
		gone(t, pids...)
	})
	t.Run("wrong identity", func(t *testing.T) {
		row, pids, _ := start(t, "exit")
		wrong := *row.StartTicks + 1
		row.StartTicks = &wrong
		if res := stop.Recorded(ctx, row.Record(), row.ScopeDesc(), stop.Options{}); res.Outcome != stop.NoAuthority {
			t.Errorf("result %+v; want no-authority", res)
		}
		if _, err := procid.Read(pids[0]); err != nil {
			t.Errorf("the child was touched: %v", err)
		}
	})
}

// TestPermissionDenied: an unprivileged caller stopping root's process from a root-owned ledger
// (which it may trust) gets permission-denied, and the process lives.
func TestPermissionDenied(t *testing.T) {
	testproc.RequireRoot(t)
	row, pids, _ := start(t, "exit")
	raw, _ := json.Marshal(row)
	h := testproc.Start(t, testproc.Helper(t, "stop-as-nobody", string(raw), "0"))
	f := h.Expect("outcome ", 10*time.Second)
	if f[0] != "permission-denied" {
		t.Errorf("outcome as uid 65534: %v; want permission-denied", f)
	}
	if _, err := procid.Read(pids[0]); err != nil {
		t.Errorf("the child did not survive: %v", err)
	}
}

// TestOtherUsersProcess: a row licenses no signal to a process that runs as another user than the
// ledger's owner: an unprivileged caller's row naming root's process, and root's row naming an
// ordinary user's process, are no-authority, and both processes live.
func TestOtherUsersProcess(t *testing.T) {
	testproc.RequireRoot(t)
	t.Run("root's process in a user's ledger", func(t *testing.T) {
		row, pids, _ := start(t, "exit")
		raw, _ := json.Marshal(row)
		h := testproc.Start(t, testproc.Helper(t, "stop-as-nobody", string(raw)))
		if f := h.Expect("outcome ", 10*time.Second); f[0] != "no-authority" {
			t.Errorf("outcome as uid 65534: %v; want no-authority", f)
		}
		if _, err := procid.Read(pids[0]); err != nil {
			t.Errorf("the child did not survive: %v", err)
		}
	})
	t.Run("a user's process in root's ledger", func(t *testing.T) {
		row, pids, _ := startAs(t, "child-as-nobody", "exit")
		res := stop.Recorded(context.Background(), row.Record(), row.ScopeDesc(), stop.Options{})
		if res.Outcome != stop.NoAuthority || !strings.Contains(res.Reason, "uid 65534") {
			t.Errorf("result %+v; want no-authority naming uid 65534", res)
		}
		if _, err := procid.Read(pids[0]); err != nil {
			t.Errorf("the child did not survive: %v", err)
		}
	})
}

// TestProtected: a row naming init, the caller, its parent or a kernel thread is no-authority,
// whatever its identity proves, and nothing is signalled.
func TestProtected(t *testing.T) {
	pids := []int{1, os.Getpid(), os.Getppid()}
	if procid.KernelThread(2) { // kthreadd, where this PID namespace shows it
		pids = append(pids, 2)
	}
	for _, pid := range pids {
		inc, err := procid.Read(pid)
		if err != nil {
			t.Fatal(err)
		}
		row := ledger.NewRow(inc, procid.Incarnation{})
		res := stop.Recorded(context.Background(), row.Record(), row.ScopeDesc(), stop.Options{Grace: 100 * time.Millisecond})
		if res.Outcome != stop.NoAuthority || !strings.Contains(res.Reason, "never signals") {
			t.Errorf("pid %d: result %+v; want no-authority, protected", pid, res)
		}
		if after, err := procid.Read(pid); err != nil || after.ID != inc.ID {
			t.Errorf("pid %d after the stop: %v, %v", pid, after.ID, err)
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
