package cli_test

// The command line on Windows (see cli_test.go for the helpers every OS shares).

import (
	"bufio"
	"bytes"
	"encoding/json"
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

	"golang.org/x/sys/windows"

	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

func init() {
	testproc.Register("exit", func(args []string) int {
		code, err := strconv.Atoi(args[0])
		if err != nil {
			return 100
		}
		return code
	})
	testproc.Register("block", helperBlock)
	// console reports whether it ignores the console's Ctrl+C: bit 0 of its ConsoleFlags, which
	// CREATE_NEW_PROCESS_GROUP sets and descendants inherit.
	testproc.Register("console", func([]string) int {
		fmt.Println("ctrl-c-ignored", windows.RtlGetCurrentPeb().ProcessParameters.ConsoleFlags&1 != 0)
		return 0
	})
}

// helperBlock prints "ready <pid> <start>" for itself and, with -grandchild, for a block helper it
// starts first; then it blocks on stdin, its lifeline, which the grandchild shares.
func helperBlock(args []string) int {
	fs := flag.NewFlagSet("block", flag.ContinueOnError)
	grandchild := fs.Bool("grandchild", false, "start a block helper below this one")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := procid.Self()
	if err != nil {
		fmt.Fprintln(os.Stderr, "block:", err)
		return 1
	}
	report := fmt.Sprintf("ready %d %d", self.PID, self.Start)
	var g *exec.Cmd
	if *grandchild {
		g = exec.Command(os.Args[0])
		g.Stdin, g.Stderr = os.Stdin, os.Stderr
		out, err := g.StdoutPipe()
		if err == nil {
			err = g.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "block:", err)
			return 1
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
		if !ok {
			fmt.Fprintf(os.Stderr, "block: grandchild said %q (%v)\n", line, err)
			return 1
		}
		report += " " + rest
	}
	fmt.Println(report)
	io.Copy(io.Discard, os.Stdin)
	if g != nil {
		g.Wait()
	}
	return 0
}

// runUnder runs `custody run` of the named helper with args.
func runUnder(t *testing.T, led, helper string, args ...string) result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := testproc.Helper(t, "custody", append([]string{"--ledger", led, "run", "--", exe}, args...)...)
	cmd.Env = append(cmd.Env, nextHelperEnv+"="+testproc.Use(helper))
	return runCmd(t, cmd)
}

// block starts a block helper that the test owns; cleanup ends it by handle.
func block(t *testing.T) (*testproc.Proc, procid.ID) {
	t.Helper()
	p := testproc.Start(t, testproc.Helper(t, "block"))
	return p, readyIDs(t, p)[0]
}

// readyIDs reads a "ready" line: the incarnations a block helper reports, its own first.
func readyIDs(t *testing.T, p *testproc.Proc) []procid.ID {
	t.Helper()
	return testid.Parse(t, p.Expect("ready ", 30*time.Second))
}

func psJSON(t *testing.T, led string, args ...string) []map[string]any {
	t.Helper()
	r := runCLI(t, append([]string{"--ledger", led, "ps", "--json"}, args...)...)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || r.code != 0 {
		t.Fatalf("ps --json: %v (%+v)", err, r)
	}
	return rows
}

// TestRunExitCodes: custody run exits with its child's code, 127 for a missing command, and
// leaves no row behind.
func TestRunExitCodes(t *testing.T) {
	led := ledgerPath(t)
	for _, code := range []int{0, 7} {
		if r := runUnder(t, led, "exit", strconv.Itoa(code)); r.code != code {
			t.Errorf("run of a child exiting %d: exit %d (stderr %q)", code, r.code, r.stderr)
		}
	}
	if r := runCLI(t, "--ledger", led, "run", "--", "no-such-command-here"); r.code != 127 {
		t.Errorf("run of a missing command: exit %d, want 127 (stderr %q)", r.code, r.stderr)
	}
	if rows := psJSON(t, led, "--all"); len(rows) != 0 {
		t.Errorf("rows left after the runs: %v", rows)
	}
}

// TestRunKilled: terminating custody run (TerminateProcess: none of its code runs) kills its
// child and grandchild through the job, though their lifeline stays open.
func TestRunKilled(t *testing.T) {
	led := ledgerPath(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--purpose", "serve", "--", exe, "-grandchild")
	cmd.Env = append(cmd.Env, nextHelperEnv+"=block")
	cmd.WaitDelay = 10 * time.Second // a survivor would hold custody's stdout and stderr open
	p := testproc.Start(t, cmd)
	ids := readyIDs(t, p) // the child writes to custody's stdout, which passes through
	rows := psJSON(t, led)
	if len(rows) != 1 || rows[0]["pid"] != float64(ids[0].PID) || rows[0]["scope"] != "job" ||
		rows[0]["purpose"] != "serve" || rows[0]["state"] != "alive" || rows[0]["spawner_pid"] != float64(p.Process.Pid) {
		t.Fatalf("ps --json while custody run runs: %v", rows)
	}
	for _, id := range ids {
		if err := id.Verify(); err != nil {
			t.Fatalf("before custody run's death: %v", err)
		}
	}
	if err := p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	testproc.WaitFor(t, 10*time.Second, func() error {
		for _, id := range ids {
			err := id.Verify()
			if err == nil {
				return fmt.Errorf("%v still runs after custody run's death", id)
			}
			if !errors.Is(err, procid.ErrGone) && !errors.Is(err, procid.ErrReused) {
				return err
			}
		}
		return nil
	})
}

// TestRunChildTakesCtrlC: the child of custody run shares custody's console process group with
// Ctrl+C enabled, so the console's ^C reaches it directly, as a Unix terminal's reaches the
// foreground group custody run gives its child. (custody ignores ^C while it waits.) A child in
// a new process group would start with Ctrl+C ignored, and ^C would reach nothing.
func TestRunChildTakesCtrlC(t *testing.T) {
	led := ledgerPath(t)
	r := runUnder(t, led, "console")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "ctrl-c-ignored false" {
		t.Errorf("custody run's child: %+v; want it to take Ctrl+C", r)
	}
	// The probe itself: a child of this test, which takes Ctrl+C, takes it too.
	p := testproc.Start(t, testproc.Helper(t, "console"))
	if f := p.Expect("ctrl-c-ignored", 30*time.Second); len(f) != 1 || f[0] != "false" {
		t.Errorf("a plain child reports ctrl-c-ignored %v", f)
	}
	p.Wait()
}

func TestPsEmpty(t *testing.T) {
	led := ledgerPath(t)
	r := runCLI(t, "--ledger", led, "ps", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" || r.stderr != "" {
		t.Errorf("ps --json of an absent ledger: %+v", r)
	}
	if _, err := os.Stat(led); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ps created the ledger: %v", err)
	}
}

// TestRegisterPsStop: a registered process is listed alive with its spawner (the test, the caller
// of custody register); custody stop kills it through a proven handle (forced: a console program
// without a window gets no request to exit from another console) and drops its row.
func TestRegisterPsStop(t *testing.T) {
	led := ledgerPath(t)
	p, id := block(t)
	pid := strconv.Itoa(id.PID)
	if r := runCLI(t, "--ledger", led, "register", "--pid", pid, "--purpose", "gateway"); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	rows := psJSON(t, led)
	if len(rows) != 1 {
		t.Fatalf("ps --json rows = %v", rows)
	}
	want := map[string]any{"pid": float64(id.PID), "start_ticks": float64(id.Start), "purpose": "gateway",
		"state": "alive", "spawner_state": "alive", "spawner_pid": float64(os.Getpid()), "reapable": true}
	for k, v := range want {
		if rows[0][k] != v {
			t.Errorf("ps --json %s = %v, want %v", k, rows[0][k], v)
		}
	}

	r := runCLI(t, "--ledger", led, "stop", "--json", pid)
	var out []struct {
		PID     int    `json:"pid"`
		Outcome string `json:"outcome"`
		Forced  bool   `json:"forced"`
		Reason  string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
		t.Fatalf("stop --json: %v (%+v)", err, r)
	}
	if len(out) != 1 || out[0].PID != id.PID || out[0].Outcome != "exited" || !out[0].Forced {
		t.Errorf("stop --json = %+v; want one exited, forced", out)
	}
	// custody stop saw the exit through its handle before it answered.
	if err := id.Verify(); !errors.Is(err, procid.ErrGone) {
		t.Errorf("after custody stop: %v, want gone", err)
	}
	if err := p.Wait(); p.ProcessState.ExitCode() != 1 {
		t.Errorf("the stopped process ended with %v; want exit code 1 from TerminateProcess", err)
	}
	if rows := psJSON(t, led, "--all"); len(rows) != 0 {
		t.Errorf("rows left after the stop: %v", rows)
	}
	if rows, err := ledger.Peek(led); err != nil || len(rows) != 0 {
		t.Errorf("the ledger file after the stop: %v, %v", rows, err)
	}
	// A second stop finds neither a row nor a process: it had already exited.
	r = runCLI(t, "--ledger", led, "stop", pid)
	if r.code != 0 || !strings.Contains(r.stdout, "already-exited") {
		t.Errorf("a second stop: %+v; want exit 0, already-exited", r)
	}
	// A live process without a row: custody has nothing to prove it by.
	_, live := block(t)
	r = runCLI(t, "--ledger", led, "stop", strconv.Itoa(live.PID))
	if r.code != 3 || !strings.Contains(r.stdout, "no-authority") {
		t.Errorf("stop of a live pid with no row: %+v; want exit 3, no-authority", r)
	}
	if err := live.Verify(); err != nil {
		t.Errorf("the process without a row after the stop: %v", err)
	}
}

func TestDoctorJSON(t *testing.T) {
	led := ledgerPath(t)
	r := runCLI(t, "--ledger", led, "doctor", "--json")
	var rep struct {
		OS       string
		Features []struct {
			Name string
			OK   bool
		}
		Ledger struct {
			Path   string
			Exists bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("doctor --json: %v (%+v)", err, r)
	}
	if rep.OS != "windows/amd64" || rep.Ledger.Path != led || rep.Ledger.Exists || len(rep.Features) == 0 {
		t.Errorf("doctor --json = %+v", rep)
	}
	for _, f := range rep.Features {
		if f.Name == "process handles" && !f.OK {
			t.Errorf("doctor reports no process handles on Windows: %+v", rep.Features)
		}
	}
}

// TestBadInput: bad input gets one line on stderr, a non-zero exit, and leaves the ledger as it was.
func TestBadInput(t *testing.T) {
	led := ledgerPath(t)
	_, live := block(t)
	if r := runCLI(t, "--ledger", led, "register", "--pid", strconv.Itoa(live.PID)); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	before, err := os.ReadFile(led)
	if err != nil {
		t.Fatal(err)
	}
	dead, deadID := block(t)
	dead.Stdin().Close()
	dead.Wait()
	tests := []struct {
		desc string
		args []string
		code int
	}{
		{"pid not a number", []string{"register", "--pid", "abc"}, 2},
		{"pid zero", []string{"register", "--pid", "0"}, 2},
		{"pid missing", []string{"register"}, 2},
		{"dead pid", []string{"register", "--pid", strconv.Itoa(deadID.PID)}, 1},
		{"unknown flag", []string{"register", "--pidd", "5"}, 2},
		{"unknown command", []string{"frobnicate"}, 2},
		{"stop pid not a number", []string{"stop", "abc"}, 2},
	}
	for _, tc := range tests {
		r := runCLI(t, append([]string{"--ledger", led}, tc.args...)...)
		checkOneLineError(t, tc.desc, r, tc.code)
		if after, _ := os.ReadFile(led); !bytes.Equal(before, after) {
			t.Errorf("%s: ledger changed", tc.desc)
		}
	}
}
