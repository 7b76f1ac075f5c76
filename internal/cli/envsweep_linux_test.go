package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// strayTree is custody run's child on the process-group path: it starts seven descendants that
// leave its group or its parentage in every usual way, each printing "p <pid>", and one that
// both clears its environment and leaves the group ("esc <pid>"); then it prints "ready" and
// waits on its stdin.
const strayTree = `echo child $$
setsid sleep 1001 & echo p $!
(sleep 1002 & echo p $!)
nohup sleep 1003 >/dev/null 2>&1 & echo p $!
/usr/bin/python3 -c '
import os, sys, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
sys.stdout.write("p %d\n" % os.getpid()); sys.stdout.flush()
os.close(1)
time.sleep(1004)
'
setsid sh -c '(sleep 1005 & echo p $!); exec sleep 1006' & echo p $!
/usr/bin/python3 -c 'import os, sys, time; os.setpgid(0, 0); sys.stdout.write("p %d\n" % os.getpid()); sys.stdout.flush(); os.close(1); time.sleep(1007)' &
env -i setsid sleep 1008 </dev/null >/dev/null 2>&1 & echo esc $!
echo ready
exec cat`

// TestStraysDie: as uid 65534 without a writable cgroup, on the process-group path, an
// 8-process tree (the child, a setsid child, a double fork, a nohup'd child, a daemonising Python
// script, a setsid shell and its double-forked child, a Python script in a group of its own)
// dies with custody run's SIGKILL, and with custody stop: the group takes the child and what
// stayed in it, the environment sweep the rest. A descendant that both clears its environment
// and calls setsid escapes the SIGKILL, as documented; it is killed here by handle.
func TestStraysDie(t *testing.T) {
	testproc.RequireRoot(t)
	for _, how := range []string{"owner SIGKILLed", "custody stop"} {
		t.Run(strings.ReplaceAll(how, " ", "-"), func(t *testing.T) {
			dir := t.TempDir()
			led := filepath.Join(dir, "state", "l.json")
			cmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--", "sh", "-c", strayTree)
			asNobody(t, cmd, dir)
			cmd.Env = append(cmd.Env, "CUSTODY_CONTAINMENT=process-group")
			p := testproc.Start(t, cmd)
			var tree []procid.ID
			var esc, child procid.ID
			for len(tree) < 7 || child.PID == 0 || esc.PID == 0 { // the Python scripts print after "ready"
				l := p.Line(30 * time.Second)
				f := strings.Fields(l)
				if len(f) != 2 || (f[0] != "p" && f[0] != "esc" && f[0] != "child") {
					t.Logf("child: %s", l)
					continue
				}
				id := readID(t, atoi(f[1]))
				t.Cleanup(func() { killID(id) }) // a failed test must not leave it running
				if f[0] == "esc" {
					esc = id
				} else if f[0] == "child" {
					child = id
				} else {
					tree = append(tree, id)
				}
			}
			tree = append(tree, child)
			if len(tree) != 8 || esc.PID == 0 {
				t.Fatalf("tree %v, escapee %v: want 8 and 1", tree, esc)
			}
			// "esc" is printed at the fork: until env has exec'd sleep with a cleared environment, the
			// escapee still carries the id (and a sweep then rightly finds it).
			testproc.WaitFor(t, 10*time.Second, func() error {
				comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", esc.PID))
				env, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/environ", esc.PID))
				if err != nil || err2 != nil || string(comm) != "sleep\n" || len(env) != 0 {
					return fmt.Errorf("escapee %v: not yet sleep with an empty environment: %q %q %v %v", esc, comm, env, err, err2)
				}
				return nil
			})
			if how == "custody stop" {
				awaitRow(t, led, fmt.Sprint(child.PID))
				stop := testproc.Helper(t, "custody", "--ledger", led, "stop", "--grace", "1s", fmt.Sprint(child.PID))
				asNobody(t, stop, t.TempDir())
				if r := runCmd(t, stop); r.code != 0 || !strings.Contains(r.stdout, "exited") {
					t.Errorf("custody stop %d as uid 65534: %+v", child.PID, r)
				}
			} else {
				p.Process.Signal(unix.SIGKILL)
			}
			testproc.WaitFor(t, 20*time.Second, func() error {
				for _, id := range tree {
					if id.Verify() == nil {
						return fmt.Errorf("%s: %v of the tree still runs", how, id)
					}
				}
				return nil
			})
			if how == "owner SIGKILLed" {
				if err := esc.Verify(); err != nil {
					t.Errorf("the descendant that cleared its environment and left the group: %v; documented to escape", err)
				}
			}
			p.Stdin().Close()
			p.Wait()
		})
	}
}

// TestFallbackSaid: as uid 65534 without a writable cgroup, custody run says once on stderr that
// it fell back to a process group and why, unless --quiet or process groups were asked for;
// --containment cgroup (or $CUSTODY_CONTAINMENT=cgroup) refuses to start, says what would give a
// cgroup, and leaves the ledger as it was (not even created); a --containment of another value
// is bad input.
func TestFallbackSaid(t *testing.T) {
	testproc.RequireRoot(t)
	dir := t.TempDir()
	led := filepath.Join(dir, "state", "l.json")
	run := func(env string, args ...string) result {
		cmd := testproc.Helper(t, "custody", append([]string{"--ledger", led}, args...)...)
		asNobody(t, cmd, dir)
		if env != "" {
			cmd.Env = append(cmd.Env, env)
		}
		return runCmd(t, cmd)
	}
	const fell = "custody: warning: run: fell back to a process group: "
	if r := run("", "run", "--", "true"); r.code != 0 || strings.Count(r.stderr, fell) != 1 || !strings.Contains(r.stderr, "not writable") {
		t.Errorf("run: %+v; want one warning saying why", r)
	}
	for _, c := range []struct {
		env  string
		args []string
	}{
		{"", []string{"run", "--quiet", "--", "true"}},
		{"CUSTODY_CONTAINMENT=process-group", []string{"run", "--", "true"}},
		{"", []string{"run", "--containment", "process-group", "--", "true"}},
	} {
		if r := run(c.env, c.args...); r.code != 0 || r.stderr != "" {
			t.Errorf("%s %v: %+v; want nothing on stderr", c.env, c.args, r)
		}
	}
	if err := os.Remove(led); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"", "CUSTODY_CONTAINMENT=cgroup"} {
		args := []string{"run", "--", "touch", filepath.Join(dir, "ran")}
		if env == "" {
			args = append([]string{"run", "--containment", "cgroup"}, args[1:]...)
		}
		r := run(env, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "custody: error: run: containment cgroup asked for: ") ||
			!strings.Contains(r.stderr, "custody: hint: a cgroup comes with one of: running as root; ") {
			t.Errorf("%s %v: %+v; want a refusal with the recipe", env, args, r)
		}
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Errorf("%s %v: the child ran", env, args)
		}
		if _, err := os.Stat(led); !os.IsNotExist(err) {
			t.Errorf("%s %v: the ledger was written (%v)", env, args, err)
		}
	}
	if r := run("", "run", "--containment", "job", "--", "true"); r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("--containment job: %+v; want a one-line usage error", r)
	}
}

// TestReapStrays: a process-group row whose process and group are gone, whose spawner is dead,
// and whose scope id a descendant still carries (it left the group; its owner and supervisor died
// together): custody reap stops that descendant through its pidfd and drops the row. The same row
// with its spawner alive is simply gone: its owner covers what is left.
func TestReapStrays(t *testing.T) {
	for _, spawnerAlive := range []bool{false, true} {
		t.Run(fmt.Sprintf("spawner-alive=%v", spawnerAlive), func(t *testing.T) {
			led := ledgerPath(t)
			id := scope.NewEnvID()
			stray := exec.Command("sleep", "1000")
			stray.Env = []string{scope.EnvScopeID + "=" + id}
			stray.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := stray.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stray.Process.Kill(); stray.Wait() })
			spawner := exec.Command("sleep", "1000")
			leader := exec.Command("true")
			leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			for _, c := range []*exec.Cmd{spawner, leader} {
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { spawner.Process.Kill(); spawner.Wait() })
			incS, err1 := procid.Read(spawner.Process.Pid)
			incL, err2 := procid.ReadChild(leader.Process.Pid)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			leader.Wait()
			if !spawnerAlive {
				spawner.Process.Kill()
				spawner.Wait()
			}
			row := ledger.NewRow(incL, incS)
			row.Purpose, row.Scope, row.PGID, row.Reapable, row.ScopeID = "serve", "pgrp", &incL.PID, &[]bool{true}[0], id
			if _, err := ledger.Open(led).Add(context.Background(), row); err != nil {
				t.Fatal(err)
			}
			r := runCLI(t, "--ledger", led, "reap", "--grace", "1s", "--json")
			var all []struct {
				PID            int
				Action, Reason string
				Cgroup         string
			}
			if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 0 {
				t.Fatalf("reap: %+v (%v)", r, err)
			}
			ds := slices.DeleteFunc(all, func(d struct {
				PID            int
				Action, Reason string
				Cgroup         string
			}) bool {
				return d.PID != incL.PID || d.Cgroup != "" // other owners' leftover cgroups are decided too
			})
			if len(ds) != 1 {
				t.Fatalf("reap: %s; want one decision for pid %d", r.stdout, incL.PID)
			}
			alive := stray.Process.Signal(syscall.Signal(0)) == nil
			if spawnerAlive {
				if ds[0].Action != "gone" || !alive {
					t.Errorf("spawner alive: %+v, stray alive %v; want the row gone and the stray left", ds[0], alive)
				}
				return
			}
			var ws *os.ProcessState
			if ds[0].Action == "reap" {
				ws, _ = stray.Process.Wait()
			}
			if ds[0].Action != "reap" || ws == nil || ws.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
				t.Errorf("spawner dead: %+v, stray %v; want it reaped by its SIGTERM", ds[0], ws)
			}
			if r := runCLI(t, "--ledger", led, "ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
				t.Errorf("rows left: %s", r.stdout)
			}
		})
	}
}
