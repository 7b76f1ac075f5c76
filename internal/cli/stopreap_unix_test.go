//go:build unix

package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
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
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

func init() {
	testproc.Register("ignore-term", func([]string) int {
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		bufio.NewScanner(os.Stdin).Scan()
		return 0
	})
	// spawner registers the PID given, as the calling process of `custody register`, then
	// blocks until the test kills it or closes its stdin.
	testproc.Register("spawner", func(args []string) int {
		exe, _ := os.Executable()
		reg := exec.Command(exe, args...)
		reg.Env = append(os.Environ(), testproc.Env("custody"))
		reg.Stderr = os.Stderr
		if err := reg.Run(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("registered")
		bufio.NewScanner(os.Stdin).Scan()
		return 0
	})
}

type outcome struct {
	PID     int    `json:"pid"`
	Outcome string `json:"outcome"`
	Forced  bool   `json:"forced"`
	Reason  string `json:"reason"`
}

func stopJSON(t *testing.T, led string, args ...string) ([]outcome, result) {
	t.Helper()
	r := runCLI(t, append([]string{"--ledger", led, "stop", "--json", "--grace", "300ms"}, args...)...)
	var out []outcome
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("stop --json output %q: %v (stderr %q)", r.stdout, err, r.stderr)
	}
	return out, r
}

// reaped starts a process reaped in the background, as its owner would.
func reaped(t *testing.T, cmd *exec.Cmd) *testproc.Proc {
	p := testproc.Start(t, cmd)
	go p.Wait()
	return p
}

func alive(t *testing.T, pid int) bool {
	t.Helper()
	_, err := procid.Read(pid)
	return err == nil
}

func TestStop(t *testing.T) {
	led := ledgerPath(t)
	term := reaped(t, exec.Command("cat"))
	ignore := reaped(t, testproc.Helper(t, "ignore-term"))
	ignore.Expect("ready", 10*time.Second)
	exited := testproc.Start(t, exec.Command("cat"))
	unregistered := reaped(t, exec.Command("cat"))
	for _, p := range []*testproc.Proc{term, ignore, exited} {
		if r := runCLI(t, "--ledger", led, "register", "--pid", strconv.Itoa(p.Process.Pid)); r.code != 0 {
			t.Fatalf("register: %+v", r)
		}
	}
	exited.Stdin().Close()
	exited.Wait()
	pids := []int{term.Process.Pid, ignore.Process.Pid, exited.Process.Pid, unregistered.Process.Pid}
	var args []string
	for _, p := range pids {
		args = append(args, strconv.Itoa(p))
	}
	out, r := stopJSON(t, led, args...)
	want := []outcome{{pids[0], "exited", false, ""}, {pids[1], "exited", true, ""},
		{pids[2], "already-exited", false, ""}, {pids[3], "no-authority", false, ""}}
	for i, w := range want {
		if i >= len(out) || out[i].PID != w.PID || out[i].Outcome != w.Outcome || out[i].Forced != w.Forced {
			t.Errorf("outcome %d = %+v, want %+v", i, out, w)
		}
	}
	if r.code != 3 {
		t.Errorf("exit %d, want 3 (one no-authority)", r.code)
	}
	if !alive(t, pids[3]) {
		t.Errorf("the unregistered process was signalled")
	}
	if rows, _ := ledger.Open(led).Rows(context.Background()); len(rows) != 0 {
		t.Errorf("rows of stopped processes left: %d", len(rows))
	}
	for _, tc := range []struct {
		desc string
		args []string
	}{{"not a number", []string{"abc"}}, {"zero", []string{"0"}}, {"none", nil}} {
		r := runCLI(t, append([]string{"--ledger", led, "stop"}, tc.args...)...)
		checkOneLineError(t, "stop "+tc.desc, r, 2)
	}
	if !alive(t, pids[3]) {
		t.Errorf("bad input signalled something")
	}
}

// TestStopTable: the text table names, for each process, the request sent before any kill.
func TestStopTable(t *testing.T) {
	led := ledgerPath(t)
	term := reaped(t, exec.Command("cat"))
	pid := strconv.Itoa(term.Process.Pid)
	if r := runCLI(t, "--ledger", led, "register", "--pid", pid); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	r := runCLI(t, "--ledger", led, "stop", pid)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("custody stop %s: %+v", pid, r)
	}
	want := [][]string{{"PID", "OUTCOME", "REQUEST", "FORCED", "REASON"}, {pid, "exited", "SIGTERM", "no", "-"}}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !slices.Equal(got, w) {
			t.Errorf("line %d of the table: %q, want %q", i, got, w)
		}
	}
}

// registerVia runs `custody register` from a spawner helper, so the row's spawner is that
// helper; the test can then kill it.
func registerVia(t *testing.T, led string, pid int, flags ...string) *testproc.Proc {
	args := append([]string{"--ledger", led, "register", "--pid", strconv.Itoa(pid)}, flags...)
	s := testproc.Start(t, testproc.Helper(t, "spawner", args...))
	s.Expect("registered", 10*time.Second)
	return s
}

type decision struct {
	PID    int    `json:"pid"`
	Cgroup string `json:"cgroup"`
	Action string `json:"action"`
	Reason string `json:"reason"`
	Result *struct {
		Outcome string `json:"outcome"`
	} `json:"result"`
}

func reapJSON(t *testing.T, led string, flags ...string) (map[int]decision, result) {
	t.Helper()
	r := runCLI(t, append([]string{"--ledger", led, "reap", "--json", "--grace", "300ms"}, flags...)...)
	var ds []decision
	if err := json.Unmarshal([]byte(r.stdout), &ds); err != nil {
		t.Fatalf("reap --json output %q: %v (stderr %q)", r.stdout, err, r.stderr)
	}
	m := map[int]decision{}
	for _, d := range ds {
		// A dead owner's cgroup directory is decided under that owner's PID, which may since
		// name one of the test's processes: only rows are keyed here.
		if d.Cgroup == "" {
			m[d.PID] = d
		}
	}
	return m, r
}

func TestReap(t *testing.T) {
	led := ledgerPath(t)
	orphan := reaped(t, exec.Command("cat"))
	kept := reaped(t, exec.Command("cat"))
	chat := reaped(t, exec.Command("cat"))
	live := reaped(t, exec.Command("cat"))
	unknown := reaped(t, exec.Command("cat"))
	var dead []*testproc.Proc
	for _, c := range []struct {
		p     *testproc.Proc
		flags []string
	}{{orphan, nil}, {kept, []string{"--keep"}}} {
		dead = append(dead, registerVia(t, led, c.p.Process.Pid, c.flags...))
	}
	registerVia(t, led, live.Process.Pid) // its spawner stays alive
	for _, s := range dead {
		s.Process.Signal(syscall.SIGKILL)
		s.Wait()
	}
	// A row from another program whose spawner cannot be proven either way: its PID lives, but
	// the row recorded no start for it.
	self, _ := procid.Self()
	inc, _ := procid.Read(unknown.Process.Pid)
	foreign := fmt.Sprintf(`[{"pid": %d, "create_time": %f, "purpose": "serve", "spawner_pid": %d, "spawner_create": null}]`,
		inc.PID, inc.CreateTime, self.PID)
	// A row from another program, without a reapable field: purpose chat is not reapable, though
	// its spawner is dead.
	gone := testproc.Start(t, exec.Command("cat"))
	goneInc, _ := procid.Read(gone.Process.Pid)
	gone.Stdin().Close()
	gone.Wait()
	chatInc, _ := procid.Read(chat.Process.Pid)
	foreign += fmt.Sprintf(`,{"pid": %d, "create_time": %f, "purpose": "chat", "spawner_pid": %d, "spawner_create": %f}]`,
		chatInc.PID, chatInc.CreateTime, goneInc.PID, goneInc.CreateTime)
	mergeRaw(t, led, strings.Replace(foreign, "}],", "},", 1))

	want := map[int][2]string{
		orphan.Process.Pid:  {"reap", "spawner-dead"},
		kept.Process.Pid:    {"keep", "not-reapable"},
		chat.Process.Pid:    {"keep", "not-reapable"},
		live.Process.Pid:    {"keep", "spawner-alive"},
		unknown.Process.Pid: {"keep", "spawner-unknown"},
	}
	check := func(ds map[int]decision) {
		t.Helper()
		for pid, w := range want {
			if d := ds[pid]; d.Action != w[0] || d.Reason != w[1] {
				t.Errorf("pid %d: %s %s, want %s %s", pid, d.Action, d.Reason, w[0], w[1])
			}
		}
	}
	ds, r := reapJSON(t, led, "--dry-run", "--all")
	check(ds)
	if r.code != 0 || !alive(t, orphan.Process.Pid) {
		t.Fatalf("dry run: exit %d, orphan alive %v", r.code, alive(t, orphan.Process.Pid))
	}
	ds, r = reapJSON(t, led, "--all")
	check(ds)
	if d := ds[orphan.Process.Pid]; d.Result == nil || d.Result.Outcome != "exited" || r.code != 0 {
		t.Errorf("orphan reap: %+v, exit %d", d, r.code)
	}
	if alive(t, orphan.Process.Pid) {
		t.Errorf("the orphan lives")
	}
	for _, p := range []*testproc.Proc{kept, chat, live, unknown} {
		if !alive(t, p.Process.Pid) {
			t.Errorf("kept pid %d was signalled", p.Process.Pid)
		}
	}
}

// mergeRaw adds rows written as another program would, keeping custody's rows.
func mergeRaw(t *testing.T, led, rows string) {
	t.Helper()
	b, err := os.ReadFile(led)
	if err != nil {
		t.Fatal(err)
	}
	merged := strings.TrimSuffix(strings.TrimSpace(string(b)), "]") + "," + strings.TrimPrefix(rows, "[")
	if err := os.WriteFile(led, []byte(merged), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReapCorrupt: reap on a corrupt ledger fails in one line, signals nothing, and the bytes go
// aside.
func TestReapCorrupt(t *testing.T) {
	led := ledgerPath(t)
	os.MkdirAll(filepath.Dir(led), 0o700)
	os.WriteFile(led, []byte("[{"), 0o600)
	r := runCLI(t, "--ledger", led, "reap")
	checkOneLineError(t, "reap on a corrupt ledger", r, 1)
	if !strings.Contains(r.stderr, "nothing was signalled") {
		t.Errorf("stderr %q does not say nothing was signalled", r.stderr)
	}
	if _, err := os.Stat(led + ".corrupt"); err != nil {
		t.Errorf("corrupt ledger not moved aside: %v", err)
	}
}
