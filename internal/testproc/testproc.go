// Package testproc runs custody's tests against real processes: the test binary re-executes
// itself as helper processes, each bounded by the test's deadline, logged, waited, and killed by
// handle at cleanup. It never signals a process it did not start.
package testproc

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "CUSTODY_TEST_HELPER"

var (
	helpers = map[string]func(args []string) int{}
	benches = map[string]bool{}
	usedMu  sync.Mutex
	used    = map[string]bool{}
)

// Register names a helper; call it from an init function or TestMain before [Main].
func Register(name string, fn func(args []string) int) { helpers[name] = fn }

// RegisterBenchmark is [Register] for a helper that only benchmarks start: [Main] does not
// require a test to start it, since a run of the tests runs no benchmark.
func RegisterBenchmark(name string, fn func(args []string) int) {
	Register(name, fn)
	benches[name] = true
}

// Main runs the named helper when the binary was started as one (see [RunHelper]), else the
// tests, then each of after: what the test process must undo before it exits.
func Main(m *testing.M, after ...func()) {
	RunHelper()
	code := m.Run()
	for _, f := range after {
		f()
	}
	if code == 0 && fullRun() {
		for name := range helpers {
			if !used[name] && !benches[name] {
				fmt.Fprintf(os.Stderr, "testproc: helper %q is registered but no test started it\n", name)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// RunHelper runs the named helper and exits when the binary was started as one, and returns
// otherwise. [Main] calls it first; a TestMain calls it itself before set-up that belongs to the
// test process alone, which a helper must not inherit (becoming a subreaper, say).
func RunHelper() {
	name := os.Getenv(helperEnv)
	if name == "" {
		return
	}
	fn, ok := helpers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "testproc: no helper %q\n", name)
		os.Exit(2)
	}
	os.Exit(fn(os.Args[1:]))
}

// fullRun reports whether every test ran with every capability, so that a helper no test started
// is dead code rather than the helper of a skipped or filtered-out test.
func fullRun() bool {
	return Privileged() && !testing.Short() && flagUnset("test.run") && flagUnset("test.skip")
}

// flagUnset reports whether the named testing flag is absent or empty.
func flagUnset(name string) bool {
	f := flag.Lookup(name)
	return f == nil || f.Value.String() == ""
}

// Privileged reports whether a missing capability must fail the test rather than skip it.
func Privileged() bool { return os.Getenv("CUSTODY_REQUIRE_PRIVILEGED") == "1" }

// Skip skips t naming the missing capability, or fails it under CUSTODY_REQUIRE_PRIVILEGED=1.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if Privileged() {
		t.Fatalf("required capability missing (CUSTODY_REQUIRE_PRIVILEGED=1): "+format, args...)
	}
	t.Skipf("skipping: "+format, args...)
}

// RequireRoot skips (or fails, see [Skip]) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (euid %d)", os.Geteuid())
	}
}

// Proc is a started helper or program.
type Proc struct {
	*exec.Cmd
	t      testing.TB
	lines  chan string
	stdin  io.WriteCloser
	waited chan struct{}
	err    error
	once   sync.Once
	// watchdog sends SIGQUIT at the test's deadline to a cmd not from Command (see Start).
	watchdog *time.Timer
}

// Helper returns an unstarted command running the named helper with args.
func Helper(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := Command(t, exe, args...)
	cmd.Env = append(os.Environ(), Env(name))
	return cmd
}

// Command returns an unstarted command for path and args, bounded as every process a test starts
// is: at [Timeout] (or when the test has ended) it gets SIGQUIT, which makes a Go helper dump its
// goroutines into the log, and SIGKILL [WaitDelay] later; Wait gives up on its output WaitDelay
// after it exited (a surviving descendant holding the pipes would otherwise hang it); and on
// Linux it dies with the test's thread that started it (Pdeathsig), a last resort for a crashed
// test. Set SysProcAttr's other fields on the one it has, rather than replacing it.
func Command(t testing.TB, path string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout(t))
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = WaitDelay
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	setDeathSignal(cmd)
	return cmd
}

// Env returns the environment assignment that makes the test binary run the named helper, for a
// helper started by other means than [Helper] (through `env`, or by a program under test).
func Env(name string) string { return helperEnv + "=" + Use(name) }

// Setenv makes every copy of the test binary that the test starts, until it ends, run the named
// helper: for a program under test that re-executes [os.Executable] with the environment it
// inherits. Like t.Setenv, it cannot be used in parallel tests.
func Setenv(t testing.TB, name string) { t.Setenv(helperEnv, Use(name)) }

// Use marks the named helper as started by a test and returns its name (see [Main]).
func Use(name string) string {
	usedMu.Lock()
	used[name] = true
	usedMu.Unlock()
	return name
}

// WaitDelay is how long [Proc.Wait] waits, after the process exited, for the descendants that
// inherited its output to let go of it (see exec.Cmd.WaitDelay): a survivor of a failed test
// would otherwise hold the pipe, and Wait with it, until go test's own timeout.
const WaitDelay = 5 * time.Second

// Timeout is how long a process a test starts may run: until the test's deadline less a margin
// in which the test can still report, or 2 minutes without a deadline.
func Timeout(t testing.TB) time.Duration {
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			return max(time.Until(d)-10*time.Second, time.Second)
		}
	}
	return 2 * time.Minute
}

// Start starts cmd with its stdin a pipe (the child's lifeline: it sees EOF when the test ends)
// and its stdout read as lines; stderr is logged. Cleanup kills it by handle and waits. A cmd
// not made by [Command] (exec.Command("cat")) is bounded the same way: SIGQUIT at [Timeout],
// SIGKILL WaitDelay later, and Wait gives up on its output WaitDelay after it exited.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, t: t, lines: make(chan string, 1024), waited: make(chan struct{})}
	setDeathSignal(cmd)
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = WaitDelay
	}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logWriter{t, cmd.Path}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	if cmd.Cancel == nil { // not from Command: no context bounds it
		p.watchdog = time.AfterFunc(Timeout(t), func() {
			cmd.Process.Signal(syscall.SIGQUIT) // through the handle: never another process
			time.AfterFunc(WaitDelay, func() { cmd.Process.Kill() })
		})
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.waited:
		default:
			p.Process.Kill()
		}
		p.Wait()
	})
	return p
}

// Stdin returns the write end of the child's stdin.
func (p *Proc) Stdin() io.WriteCloser { return p.stdin }

// Wait waits for the process once and returns its error; it is safe to call again.
func (p *Proc) Wait() error {
	p.once.Do(func() {
		p.err = p.Cmd.Wait()
		if p.watchdog != nil {
			p.watchdog.Stop()
		}
		close(p.waited)
	})
	<-p.waited
	return p.err
}

// Line returns the next stdout line, failing the test after timeout or at EOF.
func (p *Proc) Line(timeout time.Duration) string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("%v: stdout closed while waiting for a line", p.Args)
		}
		return l
	case <-time.After(timeout):
		p.t.Fatalf("%v: no line within %v", p.Args, timeout)
	}
	return ""
}

// Expect reads lines until one starts with prefix and returns its fields after the prefix. A line
// "skip <reason>" skips the test.
func (p *Proc) Expect(prefix string, timeout time.Duration) []string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l := p.Line(time.Until(deadline))
		if r, ok := strings.CutPrefix(l, "skip "); ok {
			Skip(p.t, "%s", r)
		}
		if r, ok := strings.CutPrefix(l, prefix); ok {
			return strings.Fields(r)
		}
		p.t.Logf("child: %s", l)
	}
}

// WaitFor polls cond every few milliseconds until it returns nil, failing the test with its last
// error after timeout.
func WaitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(context.Background(), timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll is [WaitFor] returning the last error instead of failing.
func Poll(ctx context.Context, timeout time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w", timeout, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

type logWriter struct {
	t    testing.TB
	name string
}

func (w logWriter) Write(b []byte) (int, error) {
	for l := range strings.Lines(string(b)) {
		w.t.Logf("child stderr: %s", strings.TrimRight(l, "\n"))
	}
	return len(b), nil
}
