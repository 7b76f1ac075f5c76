//go:build unix

package cli_test

import (
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
	// traps exits 42 on SIGTERM and 43 on SIGINT, after saying "ready".
	testproc.Register("traps", func([]string) int {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		fmt.Println("ready")
		if <-c == syscall.SIGTERM {
			return 42
		}
		return 43
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
	if r := runCLI(t, "--ledger", led, "run", "--", "no-such-command-here"); r.code != 127 {
		t.Errorf("run of a missing command: exit %d, want 127", r.code)
	}
	if r := runCLI(t, "--ledger", led, "ps", "--all", "--json"); strings.TrimSpace(r.stdout) != "[\n]" {
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
	}{{syscall.SIGTERM, 42}, {syscall.SIGINT, 43}} {
		p := startRun(t, "env", testproc.Env("traps"), exe)
		p.Expect("ready", 10*time.Second)
		p.Process.Signal(tc.sig)
		if got := exitCodeOf(p.Wait()); got != tc.code {
			t.Errorf("custody run sent %v: exit %d, want the child's %d", tc.sig, got, tc.code)
		}
	}
}

// TestRunStopsLeftovers: a background grandchild left by the child is stopped when the child
// exits.
func TestRunStopsLeftovers(t *testing.T) {
	p := startRun(t, "sh", "-c", "sleep 1000 & echo bg $!")
	bg := atoi(p.Expect("bg ", 10*time.Second)[0])
	if err := p.Wait(); err != nil {
		t.Fatalf("custody run: %v", err)
	}
	if _, err := procid.Read(bg); !errors.Is(err, procid.ErrGone) {
		t.Errorf("background grandchild %d still runs: %v", bg, err)
	}
}

// TestRunKilled: SIGKILL of custody run kills the whole scope within the grace.
func TestRunKilled(t *testing.T) {
	p := startRun(t, "sh", "-c", "sleep 1000 & echo pids $$ $!; wait")
	f := p.Expect("pids ", 10*time.Second)
	p.Process.Signal(syscall.SIGKILL)
	p.Wait()
	testproc.WaitFor(t, 2*time.Second, func() error { // grace 1s, plus a second
		for _, s := range f {
			if _, err := procid.Read(atoi(s)); !errors.Is(err, procid.ErrGone) {
				return fmt.Errorf("pid %s of the scope still runs", s)
			}
		}
		return nil
	})
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
	job.Env = append(os.Environ(), "CUSTODY_TEST_HELPER=custody")
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
// continues both, and the child reads the terminal again.
func TestRunJobControl(t *testing.T) {
	exe, _ := os.Executable()
	ptmx, s := ptyStart(t, testproc.Helper(t, "jobshell", exe, "--ledger", ledgerPath(t), "run", "--", "cat"))
	ptmx.Write([]byte("one\n"))
	s.waitForCount(t, "one", 2)
	ptmx.Write([]byte{0x1a}) // ^Z
	s.waitFor(t, "shell: job stopped")
	ptmx.Write([]byte("two\n"))
	s.waitForCount(t, "two", 2)
	ptmx.Write([]byte{4}) // ^D
	s.waitFor(t, "shell: job exit 0")
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
