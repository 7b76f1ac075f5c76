package cli_test

// The command line is tested as a program: the test binary re-executed as custody (the "custody"
// helper), and as the children custody starts. Helpers of one OS register in an init function of
// their file.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/cli"
	"github.com/custody-dev/custody/internal/testproc"
)

const (
	// nextHelperEnv names the helper that a "custody" helper's `custody run` is to start: Windows
	// has no `env` to pass one through, so the custody helper hands it on in testproc's variable.
	nextHelperEnv = "CUSTODY_TEST_NEXT_HELPER"
)

func TestMain(m *testing.M) {
	custody.Init() // custody run's supervisor is this binary, re-executed
	// argv prints its arguments as one JSON array: what custody run passed on.
	testproc.Register("argv", func(args []string) int {
		json.NewEncoder(os.Stdout).Encode(args)
		return 0
	})
	testproc.Register("custody", func([]string) int {
		if next := os.Getenv(nextHelperEnv); next != "" {
			k, v, _ := strings.Cut(testproc.Env(next), "=")
			os.Setenv(k, v) // what custody run starts inherits it
			os.Unsetenv(nextHelperEnv)
		}
		return cli.Main()
	})
	testproc.Main(m)
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command line as its own process.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCmd(t, testproc.Helper(t, "custody", args...))
}

// runCmd runs cmd to its end, killed by handle if it outlives a minute, and returns its exit
// code and output.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	cmd = startRetrying(t, cmd)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("custody %v: no exit within a minute (stderr %q)", cmd.Args[1:], errb.String())
	}
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// startRetrying starts cmd, or a copy of it. Under Wine, process creation fails now and then
// while the machine is loaded (CreateProcess answers "Internal error" before any of the new
// process runs), which says nothing of custody: on Windows a start that failed so is tried again
// on a copy of cmd, up to twice. Elsewhere a failed start fails the test at once.
func startRetrying(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := cmd.Start()
		if err == nil {
			return cmd
		}
		if runtime.GOOS != "windows" || attempt == 2 {
			t.Fatal(err)
		}
		t.Logf("start %v: %v; trying again", cmd.Args, err)
		again := testproc.Command(t, cmd.Path, cmd.Args[1:]...)
		again.Args, again.Env, again.Dir, again.SysProcAttr = cmd.Args, cmd.Env, cmd.Dir, cmd.SysProcAttr
		again.Stdin, again.Stdout, again.Stderr, again.WaitDelay = cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.WaitDelay
		cmd = again
	}
}

// ledgerPath returns a ledger path in a directory that does not exist yet.
func ledgerPath(t *testing.T) string {
	return filepath.Join(testproc.TempDir(t), "state", "spawn-ledger.json")
}

func checkOneLineError(t *testing.T, desc string, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Errorf("%s: exit %d, want %d (stderr %q)", desc, r.code, code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "custody: error: ") {
		t.Errorf("%s: stderr %q, want one 'custody: error:' line", desc, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("%s: stdout %q, want nothing", desc, r.stdout)
	}
}

// TestHelp: the root and every command document their exit status.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"ps", "--help"}, {"register", "--help"},
		{"stop", "--help"}, {"reap", "--help"}, {"supervise", "--help"}, {"doctor", "--help"}, {"version", "--help"}} {
		r := runCLI(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "EXIT STATUS") {
			t.Errorf("custody %v: exit %d, no EXIT STATUS section:\n%s", args, r.code, r.stdout)
		}
	}
}

// TestHelpForms: help is asked for in every way cobra took it, on standard output with exit 0; an
// argument after --help, or a topic that names no command, gets the help of the command at hand.
func TestHelpForms(t *testing.T) {
	const root, run = "Available Commands:", "custody run [--purpose P]"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, root},
		{[]string{"-h"}, root},
		{[]string{"help"}, root},
		{[]string{"--help", "frobnicate"}, root},
		{[]string{"help", "run"}, run},
		{[]string{"--help", "run"}, run},
		{[]string{"run", "-h"}, run},
		{[]string{"run", "--help", "sh"}, run},
		{[]string{"stop", "--help", "42"}, "custody stop [--grace D] [--json] PID..."},
		{[]string{"supervise", "--help"}, "the owner's process group, never signalled (default: the parent's PID)"},
	} {
		r := runCLI(t, tc.args...)
		if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("custody %q: exit %d, stderr %q, stdout without %q:\n%s", tc.args, r.code, r.stderr, tc.want, r.stdout)
		}
	}
}

// TestConventions: --version, completion scripts, and usage errors in words a person reads: flags
// with two dashes, what is missing or extra said as such, and an unknown help topic an error.
func TestConventions(t *testing.T) {
	if r := runCLI(t, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "custody version ") {
		t.Errorf("--version: %+v", r)
	}
	for shell, purpose := range map[string]string{"bash": "--purpose", "zsh": "--purpose", "fish": "-l purpose"} {
		r := runCLI(t, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, "custody") || !strings.Contains(r.stdout, purpose) {
			t.Errorf("completion %s: %+v", shell, r)
		}
	}
	for _, tc := range []struct {
		args       []string
		want, lose string // in the one error line; never in it
	}{
		{[]string{"help", "frobnicate"}, `there is no command "frobnicate"`, ""},
		{[]string{"frobnicate"}, `there is no command "frobnicate"`, ""},
		{[]string{"ps", "extra"}, `custody ps takes no arguments, but was given "extra"`, ""},
		{[]string{"run"}, "custody run needs a command to run", "arg(s)"},
		{[]string{"stop"}, "custody stop needs at least one PID", "arg(s)"},
		{[]string{"ps", "--grace", "1s"}, "--grace", " -grace"},
		{[]string{"run", "--grace", "abc", "--", "x"}, "--grace", " -grace"},
		{[]string{"completion"}, "needs a shell", ""},
		{[]string{"completion", "tcsh"}, `no script for "tcsh"`, ""},
	} {
		r := runCLI(t, append([]string{"--ledger", ledgerPath(t)}, tc.args...)...)
		checkOneLineError(t, strings.Join(tc.args, " "), r, 2)
		if !strings.Contains(r.stderr, tc.want) || tc.lose != "" && strings.Contains(r.stderr, tc.lose) {
			t.Errorf("custody %q: stderr %q, want %q and not %q", tc.args, r.stderr, tc.want, tc.lose)
		}
	}
}

// TestUsageErrors: bad flags and arguments of every command get one line and exit 2, before
// anything touches the ledger.
func TestUsageErrors(t *testing.T) {
	led := ledgerPath(t)
	for _, args := range [][]string{
		{"--bogus", "ps"},
		{"ps", "--bogus"},
		{"run"},
		{"run", "--"},
		{"run", "--grace", "abc", "--", "true"},
		{"run", "--grace", "0s", "--", "true"},
		{"run", "--purpose"},
		{"run", "--purpose", "", "--", "true"},
		{"run", "--purpose", "a:b", "--", "true"},
		{"register", "--pid", "1", "--purpose", ""},
		{"run", "--tag-env", "A=B", "--", "true"},
		{"run", "--tag-env", "9X", "--", "true"},
		{"run", "--tag-env", "PATH", "--", "true"}, // set, and not a spawn tag
		{"stop", "--grace", "0s", "1"},
		{"stop", "--json=maybe", "1"},
		{"reap", "extra"},
		{"reap", "--grace", "-1s"},
		{"adopt", "--grace", "0s", "grant"},
		{"supervise", "--grace", "0s"},
		{"doctor", "extra"},
		{"register", "--pid", "1", "--port", "x"},
		{"register", "--pid", "1", "--port", "65536"},
		{"supervise", "--owner-pgid", "x"},
		{"supervise", "extra"},
		{"supervise", "1", "2"},
		{"supervise", "--owner-pgid", "5", "6"},
		{"supervise", "--socket-path"},
	} {
		r := runCLI(t, append([]string{"--ledger", led}, args...)...)
		checkOneLineError(t, strings.Join(args, " "), r, 2)
	}
	if _, err := os.Stat(filepath.Dir(led)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bad input created the ledger's directory: %v", err)
	}
}

// TestGraceFlags: the --grace flags are one flag, with one check and one message.
func TestGraceFlags(t *testing.T) {
	for _, verb := range []string{"run", "adopt", "stop", "reap", "supervise", "agent"} {
		r := runCLI(t, verb, "--grace", "0s", "x")
		want := fmt.Sprintf("custody: error: invalid value \"0s\" for flag --grace: must be positive (see 'custody %s --help')\n", verb)
		if r.code != 2 || r.stderr != want {
			t.Errorf("%s --grace 0s: exit %d, stderr %q; want 2, %q", verb, r.code, r.stderr, want)
		}
	}
}

// TestGlobalFlagsAnywhere: the global flags are taken after the command's name too, and boolean
// flags take an explicit value.
func TestGlobalFlagsAnywhere(t *testing.T) {
	led := ledgerPath(t)
	r := runCLI(t, "doctor", "--json=true", "--ledger", led)
	var rep struct{ Ledger struct{ Path string } }
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || rep.Ledger.Path != led {
		t.Errorf("doctor --json=true --ledger %s: %v (%+v)", led, err, r)
	}
}

// TestRunArgv: everything after CMD, and everything after the first "--", reaches CMD untouched,
// flags of custody's and a later "--" included.
func TestRunArgv(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	led := ledgerPath(t)
	for _, tc := range []struct {
		flags, argv []string // custody run [flags] exe [argv]
	}{
		{[]string{"--"}, []string{"--grace", "5s", "-h", "--json", "--", "x"}},
		{[]string{"--grace", "1s", "--"}, []string{"help", "--keep"}},
		{[]string{"--purpose", "p"}, []string{"--grace", "5s", "--help"}},
		{nil, []string{"--", "-n"}}, // a "--" right after CMD is CMD's
		{[]string{"--"}, []string{"--", "--", ""}},
	} {
		args := append(append([]string{"--ledger", led, "run"}, tc.flags...), exe)
		cmd := testproc.Helper(t, "custody", append(args, tc.argv...)...)
		cmd.Env = append(cmd.Env, nextHelperEnv+"="+testproc.Use("argv"))
		r := runCmd(t, cmd)
		var got []string
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 || !slices.Equal(got, tc.argv) {
			t.Errorf("custody run %q exe %q: the child got %q (%v, exit %d, stderr %q)", tc.flags, tc.argv, got, err, r.code, r.stderr)
		}
	}
}
