//go:build unix

package cli_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() {
	// traps exits 42 on SIGTERM, 43 on SIGINT and 44 on SIGWINCH, after saying "ready".
	testproc.Register("traps", func([]string) int {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGWINCH)
		fmt.Println("ready")
		return map[os.Signal]int{syscall.SIGTERM: 42, syscall.SIGINT: 43, syscall.SIGWINCH: 44}[<-c]
	})
}

func TestRunExitCodes(t *testing.T) {
	led := ledgerPath(t)
	for _, tc := range []struct {
		script string
		code   int
	}{{"exit 0", 0}, {"exit 7", 7}, {"kill -TERM $$", 143}} {
		r := runCLI(t, "--ledger", led, "run", "--", "sh", "-c", tc.script)
		if r.code != tc.code {
			t.Errorf("run sh -c %q: exit %d, want %d (stderr %q)", tc.script, r.code, tc.code, r.stderr)
		}
	}
	for _, tc := range []struct {
		cmd  string
		code int
	}{{"no-such-command-here", 127}, {"./no-such-command-here", 127}, {t.TempDir(), 126}} {
		if r := runCLI(t, "--ledger", led, "run", "--", tc.cmd); r.code != tc.code {
			t.Errorf("run %s: exit %d, want %d (stderr %q)", tc.cmd, r.code, tc.code, r.stderr)
		}
	}
	if r := runCLI(t, "--ledger", led, "ps", "--all", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("rows left after the runs: %s", r.stdout)
	}
}

// startRun starts `custody run` as a process whose stdout the test reads line by line.
func startRun(t *testing.T, args ...string) *testproc.Proc {
	cmd := testproc.Helper(t, "custody", append([]string{"--ledger", ledgerPath(t), "run", "--grace", "1s", "--"}, args...)...)
	return testproc.Start(t, cmd)
}

func exitCodeOf(err error) int {
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

func TestRunForwardsSignals(t *testing.T) {
	exe, _ := os.Executable()
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 42}, {syscall.SIGINT, 43}, {syscall.SIGWINCH, 44}} { // no terminal: SIGWINCH too
		p := startRun(t, "env", testproc.Env("traps"), exe)
		p.Expect("ready", 10*time.Second)
		p.Process.Signal(tc.sig)
		if got := exitCodeOf(p.Wait()); got != tc.code {
			t.Errorf("custody run sent %v: exit %d, want the child's %d", tc.sig, got, tc.code)
		}
	}
}

// TestRunVerbose: --verbose says how the child ended and what was stopped after it.
func TestRunVerbose(t *testing.T) {
	led := ledgerPath(t)
	for _, tc := range []struct {
		script, want string
		code         int
	}{
		{"exit 3", "exited with status 3; nothing was left in its scope", 3},
		{"kill -KILL $$", "was killed by signal 9 (exit status 137); nothing was left in its scope", 137},
	} {
		r := runCLI(t, "--ledger", led, "run", "--verbose", "--", "sh", "-c", tc.script)
		checkVerbose(t, tc.script, r.code, r.stderr, tc.code, tc.want)
	}
	// A leftover: the child lives until its stdin closes, so that custody surely took it into
	// custody (a child gone before that is not covered, and what it left is killed at once).
	var stderr bytes.Buffer
	cmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--verbose", "--grace", "1s", "--",
		"sh", "-c", "sleep 1000 & echo bg; read x; exit 5")
	cmd.Stderr = &stderr
	p := testproc.Start(t, cmd)
	p.Expect("bg", 10*time.Second)
	p.Stdin().Close()
	code := exitCodeOf(p.Wait())
	checkVerbose(t, "a leftover", code, stderr.String(), 5, "exited with status 5; what was left in its scope was stopped")
	if r := runCLI(t, "--ledger", led, "run", "--", "true"); r.stderr != "" {
		t.Errorf("run without --verbose wrote %q", r.stderr)
	}
}

func checkVerbose(t *testing.T, desc string, code int, stderr string, wantCode int, want string) {
	t.Helper()
	if code != wantCode || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("run --verbose, %s: exit %d, stderr %q; want %d and one line with %q", desc, code, stderr, wantCode, want)
	}
}

// TestRunStopsLeftovers: a background grandchild left by the child is stopped when the child
// exits. The child lives until its stdin closes: one that exits before custody has read its
// start is never covered, and what it left is killed at once, before the test could read it.
func TestRunStopsLeftovers(t *testing.T) {
	p := startRun(t, "sh", "-c", "sleep 1000 & echo bg $!; read x; exit 0")
	bg, err := procid.Read(atoi(p.Expect("bg ", 10*time.Second)[0]))
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	if err := p.Wait(); err != nil {
		t.Fatalf("custody run: %v", err)
	}
	if err := bg.ID.Verify(); err == nil {
		t.Errorf("background grandchild %v still runs", bg.ID)
	}
}

// ptyRun runs `custody run -- args` on a new pseudo-terminal, as a session leader whose
// controlling terminal it is, the way a shell would start it.
func ptyRun(t *testing.T, args ...string) (*os.File, *exec.Cmd, *screen) {
	t.Helper()
	cmd := testproc.Helper(t, "custody", append([]string{"--ledger", ledgerPath(t), "run", "--"}, args...)...)
	ptmx, s := ptyStart(t, cmd)
	return ptmx, cmd, s
}

// ptyStart starts cmd as a session leader on a new pseudo-terminal and records what the terminal
// shows; cleanup closes the terminal and kills cmd by handle.
func ptyStart(t *testing.T, cmd *exec.Cmd) (*os.File, *screen) {
	t.Helper()
	ptmx, err := pty.Start(cmd)
	if err != nil {
		testproc.Skip(t, "no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close(); cmd.Process.Kill(); cmd.Wait() })
	s := &screen{}
	go io.Copy(s, ptmx)
	return ptmx, s
}

// screen collects what the terminal shows.
type screen struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *screen) waitFor(t *testing.T, text string) {
	t.Helper()
	testproc.WaitFor(t, 10*time.Second, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !strings.Contains(s.b.String(), text) {
			return fmt.Errorf("terminal shows %q, not %q", s.b.String(), text)
		}
		return nil
	})
}

func (s *screen) count(text string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), text)
}

func TestRunInTerminalCat(t *testing.T) {
	ptmx, cmd, s := ptyRun(t, "cat")
	ptmx.Write([]byte("hello custody\n"))
	// The terminal echoes the typed line and cat writes it back: two copies.
	testproc.WaitFor(t, 10*time.Second, func() error {
		if n := s.count("hello custody"); n < 2 {
			return fmt.Errorf("seen %d copies of the line", n)
		}
		return nil
	})
	ptmx.Write([]byte{4}) // ^D: end of input for cat
	if err := cmd.Wait(); err != nil {
		t.Errorf("custody run -- cat after EOF: %v", err)
	}
}

func TestRunInTerminalShell(t *testing.T) {
	ptmx, cmd, s := ptyRun(t, "sh", "-c", "echo prompt; read x; echo got $x")
	s.waitFor(t, "prompt")
	ptmx.Write([]byte("typed\n"))
	s.waitFor(t, "got typed")
	if err := cmd.Wait(); err != nil {
		t.Errorf("custody run -- sh: %v", err)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

func init() { testproc.Register("jobshell", helperJobShell) }

// helperJobShell plays a job-control shell on its controlling terminal: it runs its arguments (a
// custody run) as a foreground job in a process group of its own, reports "stopped" when the job
// stops and then continues it in the foreground like fg, and reports "exit N" at the end.
func helperJobShell(args []string) int {
	job := exec.Command(args[0], args[1:]...)
	job.Env = append(os.Environ(), testproc.Env("custody"))
	job.Stdin, job.Stdout, job.Stderr = os.Stdin, os.Stdout, os.Stderr
	job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
	if err := job.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	signal.Ignore(syscall.SIGTTOU) // the shell takes the terminal back from the background
	pid := job.Process.Pid
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil); err != nil {
			fmt.Println("error", err)
			return 1
		}
		if ws.Stopped() {
			unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
			fmt.Println("shell: job stopped")
			unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pid) // fg
			syscall.Kill(-pid, syscall.SIGCONT)
			continue
		}
		unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
		fmt.Printf("shell: job exit %d\n", ws.ExitStatus())
		return 0
	}
}

// TestRunJobControl: under a job-control shell, ^Z stops the child and custody with it; fg
// continues both, and the child reads the terminal again, without being stopped again: a child
// that custody continued before custody itself had stopped reads from the background after fg and
// is stopped by SIGTTIN, which the shell reports as a second stop. Twenty rounds, because that race
// lost about half of them.
func TestRunJobControl(t *testing.T) {
	exe, _ := os.Executable()
	ptmx, s := ptyStart(t, testproc.Helper(t, "jobshell", exe, "--ledger", ledgerPath(t), "run", "--", "cat"))
	ptmx.Write([]byte("line0\n"))
	s.waitForCount(t, "line0", 2)
	const rounds = 20
	for i := 1; i <= rounds; i++ {
		ptmx.Write([]byte{0x1a}) // ^Z
		s.waitForCount(t, "shell: job stopped", i)
		line := fmt.Sprintf("line%02d", i)
		ptmx.Write([]byte(line + "\n"))
		s.waitForCount(t, line, 2) // the terminal's echo and cat's copy
		if n := s.count("shell: job stopped"); n != i {
			t.Fatalf("round %d: the shell saw %d stops, want %d: fg did not leave the child running", i, n, i)
		}
	}
	ptmx.Write([]byte{4}) // ^D
	s.waitFor(t, "shell: job exit 0")
	if n := s.count("shell: job stopped"); n != rounds {
		t.Errorf("the shell saw %d stops for %d ^Z", n, rounds)
	}
}

func (s *screen) waitForCount(t *testing.T, text string, n int) {
	t.Helper()
	testproc.WaitFor(t, 10*time.Second, func() error {
		if c := s.count(text); c < n {
			return fmt.Errorf("seen %d copies of %q, want %d", c, text, n)
		}
		return nil
	})
}
