//go:build linux || darwin

package supervise_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

// envRequire makes a missing capability fail the tests that need it instead of skipping them.
const envRequire = "CUSTODY_REQUIRE_PRIVILEGED"

func TestMain(m *testing.M) {
	// The Client's default supervisor re-executes this binary: Init turns that copy into it.
	holdSupervisor()
	supervise.Init()
	testproc.RunHelper()
	if err := becomeReaper(); err != nil {
		reaperErr = err
	}
	testproc.Main(m)
}

// envHold names a file that a supervisor started by this binary waits for before it calls Init,
// so that a test can act while a supervisor it started is not yet ready (see holdSupervisor).
const envHold = "CUSTODY_TEST_HOLD_SUPERVISOR"

// holdSupervisor, in a copy of this binary started as a supervisor with $envHold set, waits until
// the file it names exists, for up to a minute: a supervisor whose runtime is slow to start, as
// one on a loaded machine is, frozen at the point where it has not read its pipe yet.
func holdSupervisor() {
	f := os.Getenv(envHold)
	if f == "" || os.Getenv(supervise.EnvSupervisor) != "1" {
		return
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(f); err == nil {
			return
		}
	}
}

// reaperErr says why this test process could not become the reaper of its orphaned descendants.
var reaperErr error

// requireCapability skips a test that lacks what it needs, or fails it under
// $CUSTODY_REQUIRE_PRIVILEGED=1, where every capability is expected.
func requireCapability(tb testing.TB, what string, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if testproc.Privileged() {
		tb.Fatalf("%s required ($%s=1): %v", what, envRequire, err)
	}
	tb.Skipf("skipping: %s not available: %v", what, err)
}

// helperOpts shapes a helper process.
type helperOpts struct {
	env     []string
	stdin   *os.File            // nil: a pipe from the test (helperProc.stdin)
	extra   []*os.File          // descriptors 3, 4, ...
	setpgid bool                // its own process group
	setsid  bool                // its own session
	stdout  bool                // read its stdout as lines (helperProc.lines)
	cred    *syscall.Credential // nil: the test's own user
}

// helperProc is a running helper, started by and bounded to one test.
type helperProc struct {
	tb    testing.TB
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{} // closed when Wait returned
	err   error         // Wait's result, set before done closes
}

// startHelper starts the test binary as the named helper. The process is bounded as
// testproc.Command bounds every test process (SIGQUIT as the test's deadline nears, WaitDelay,
// Pdeathsig), killed and waited in t.Cleanup if the test did not wait for it, and its stderr goes
// to t.Logf.
func startHelper(tb testing.TB, name string, args []string, o helperOpts) *helperProc {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	o.env = append([]string{testproc.Env(name)}, o.env...)
	return startProcess(tb, name, exe, args, o)
}

// startProcess starts any program under the same rules as startHelper.
func startProcess(tb testing.TB, name, path string, args []string, o helperOpts) *helperProc {
	tb.Helper()
	var err error
	cmd := testproc.Command(tb, path, args...) // bounded by the test's deadline; see there
	cmd.Env = append(os.Environ(), o.env...)
	cmd.ExtraFiles = o.extra
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Setsid = o.setpgid && !o.setsid, o.setsid
	cmd.SysProcAttr.Credential = o.cred
	h := &helperProc{tb: tb, name: name, cmd: cmd, done: make(chan struct{})}
	if o.stdin != nil {
		cmd.Stdin = o.stdin
	} else if h.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	// Output goes through pipes this test reads itself rather than through exec's copying, so
	// that Wait does not wait for descendants that inherited them (a supervisor, a survivor).
	cmd.Stderr, _ = pipeLines(tb, func(l string) { tb.Logf("%s: %s", name, l) })
	if o.stdout {
		h.lines = make(chan string, 8192)
		w, done := pipeLines(tb, func(l string) {
			select {
			case h.lines <- l:
			default:
				tb.Errorf("%s: stdout line dropped: %q", name, l)
			}
		})
		cmd.Stdout = w
		go func() {
			<-done
			close(h.lines)
		}()
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start helper %s: %v", name, err)
	}
	cmd.Stderr.(*os.File).Close()
	if o.stdout {
		cmd.Stdout.(*os.File).Close()
	}
	go func() {
		h.err = cmd.Wait()
		close(h.done)
	}()
	tb.Cleanup(func() {
		if h.stdin != nil {
			h.stdin.Close()
		}
		cmd.Process.Kill() // through the handle: a no-op once it has exited
		<-h.done
	})
	return h
}

// pipeLines returns the write end of a pipe whose lines go to sink until EOF or the test's
// cleanup, which closes the read end and waits for the reader.
func pipeLines(tb testing.TB, sink func(string)) (*os.File, <-chan struct{}) {
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			sink(sc.Text())
		}
	}()
	tb.Cleanup(func() {
		r.Close()
		<-done
	})
	return w, done
}

// wait waits for the helper to exit and returns its Wait error.
func (h *helperProc) wait(timeout time.Duration) error {
	h.tb.Helper()
	select {
	case <-h.done:
		return h.err
	case <-time.After(timeout):
		h.tb.Fatalf("helper %s (pid %d) did not exit within %v", h.name, h.cmd.Process.Pid, timeout)
		return nil
	}
}

// line returns the helper's next stdout line.
func (h *helperProc) line(timeout time.Duration) string {
	h.tb.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			h.tb.Fatalf("helper %s: stdout closed", h.name)
		}
		return l
	case <-time.After(timeout):
		h.tb.Fatalf("helper %s: no line within %v", h.name, timeout)
		return ""
	}
}

// call sends a command to an owner helper and returns the lines it answered before "ok".
func (h *helperProc) call(cmd string) []string {
	h.tb.Helper()
	if _, err := io.WriteString(h.stdin, cmd+"\n"); err != nil {
		h.tb.Fatalf("owner: %s: %v", cmd, err)
	}
	var out []string
	for {
		l := h.line(20 * time.Second)
		switch {
		case l == "ok":
			return out
		case strings.HasPrefix(l, "error: "):
			h.tb.Fatalf("owner: %s: %s", cmd, l)
		default:
			out = append(out, l)
		}
	}
}

// readyIDs parses "ready <pid> <start>" lines into incarnations.
func readyIDs(tb testing.TB, lines []string) []procid.ID {
	tb.Helper()
	var ids []procid.ID
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "ready" {
			continue
		}
		ids = append(ids, testid.Parse(tb, f[1:])...)
	}
	return ids
}

// supID parses "sup <pid> <start>" from an owner's answer.
func supID(tb testing.TB, lines []string) procid.ID {
	tb.Helper()
	return namedID(tb, lines, "sup")
}

// namedID parses "<name> <pid> <start>" from an owner's answer.
func namedID(tb testing.TB, lines []string, name string) procid.ID {
	tb.Helper()
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == name {
			pid, _ := strconv.Atoi(f[1])
			start, _ := strconv.ParseUint(f[2], 10, 64)
			return procid.ID{PID: pid, Start: start}
		}
	}
	tb.Fatalf("no %s line in %q", name, lines)
	return procid.ID{}
}

// alive reports whether the incarnation is alive now.
func alive(id procid.ID) bool { return id.Verify() == nil }

// newLifeline returns the read end of a pipe whose write end only this test holds, closed at
// cleanup: helpers read it as stdin and exit at EOF, so a broken test cannot leak them for long.
func newLifeline(tb testing.TB) *os.File {
	tb.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close(); r.Close() })
	return r
}

// allGone checks that every incarnation is gone: exited (a zombie counts) or its PID reused.
func allGone(ids ...procid.ID) error {
	var live []procid.ID
	for _, id := range ids {
		if err := id.Verify(); !errors.Is(err, procid.ErrGone) && !errors.Is(err, procid.ErrReused) {
			live = append(live, id)
		}
	}
	if len(live) > 0 {
		return fmt.Errorf("still alive: %v", live)
	}
	return nil
}

// settle reaps the orphans among ids that were reparented to this test (the subreaper) and then
// checks that none of them is left a zombie.
func settle(tb testing.TB, ids ...procid.ID) {
	tb.Helper()
	testproc.WaitFor(tb, 10*time.Second, func() error { return allGone(ids...) })
	for _, id := range ids {
		reapOrphan(tb, id)
	}
	for _, id := range ids {
		if zombie(id) {
			tb.Errorf("%v is a zombie", id)
		}
	}
}
