package authority_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() { testproc.Register("sleep", helperSleep) }

func TestMain(m *testing.M) { testproc.Main(m) }

// helperSleep reports "ready", answers each "ping" line with "pong" (a round trip proves it
// alive and unsignalled), and exits 0 at EOF on stdin: its lifeline, so a broken test cannot
// leak it.
func helperSleep([]string) int {
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "ping" {
			fmt.Println("pong")
		}
	}
	return 0
}

// child is a started helper, reaped in the background as soon as it exits, like a real owner
// reaps its children.
type child struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
	done   chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's result
	inc    *procid.Incarnation
}

// startHelper starts the named helper; configure, if not nil, adjusts the command first (for
// SysProcAttr). Cleanup kills it by handle if the test left it running, and fails the test then.
func startHelper(t testing.TB, name string, configure func(*exec.Cmd), args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := testproc.Command(t, exe, args...) // bounded by the test's deadline; see there
	// A race-enabled binary sleeps a second at exit (atexit_sleep_ms) unless told otherwise.
	cmd.Env = append(os.Environ(), testproc.Env(name), "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	if configure != nil {
		configure(cmd)
	}
	c := &child{t: t, name: name, cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	cmd.Stderr = &c.stderr
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", name, err)
	}
	w.Close()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(c.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			t.Errorf("helper %s (pid %d) still running at the end of the test; killing it", name, cmd.Process.Pid)
			cmd.Process.Kill() // by handle (pidfd on Linux), never by name
			<-c.done
		}
		<-readDone
		r.Close()
		if c.stderr.Len() > 0 {
			t.Logf("helper %s stderr:\n%s", name, c.stderr.String())
		}
	})
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// expect reads stdout lines until one starts with prefix and returns the rest of it.
func (c *child) expect(prefix string) string {
	c.t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("helper %s: stdout closed while waiting for %q", c.name, prefix)
			}
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(rest)
			}
			c.t.Logf("helper %s: %s", c.name, l)
		case <-timer.C:
			c.t.Fatalf("helper %s: no %q line within 30s", c.name, prefix)
		}
	}
}

// incarnation waits for "ready" and reads the helper's incarnation, once.
func (c *child) incarnation() procid.Incarnation {
	c.t.Helper()
	if c.inc == nil {
		c.expect("ready")
		inc, err := procid.ReadExact(c.pid())
		if err != nil {
			c.t.Fatalf("read helper %s: %v", c.name, err)
		}
		c.inc = &inc
	}
	return *c.inc
}

// assertAlive proves the helper alive and unsignalled: it answers a ping, and it has not exited.
func (c *child) assertAlive() {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, "ping\n"); err != nil {
		c.t.Fatalf("helper %s: ping: %v", c.name, err)
	}
	c.expect("pong")
	select {
	case <-c.done:
		c.t.Fatalf("helper %s exited: %v", c.name, c.err)
	default:
	}
}

// stop closes the helper's lifeline and waits for it to exit on its own.
func (c *child) stop() {
	c.t.Helper()
	c.stdin.Close()
	c.waitExit()
}

// waitExit waits for the helper to exit and be reaped.
func (c *child) waitExit() {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.t.Fatalf("helper %s (pid %d) did not exit within 30s", c.name, c.pid())
	}
}

// exactRecord is what a ledger row written by custody holds for inc.
func exactRecord(inc procid.Incarnation) procid.Record {
	rec := procid.Record{PID: inc.PID, StartTicks: &inc.Start, CreateTime: &inc.CreateTime}
	if inc.BootID != "" {
		rec.BootID = &inc.BootID
	}
	return rec
}

// pidfsRecord is exactRecord with the pidfs id, where the kernel has them.
func pidfsRecord(inc procid.Incarnation) procid.Record {
	rec := exactRecord(inc)
	if inc.PidfdID != 0 {
		rec.PidfdID = &inc.PidfdID
	}
	return rec
}

func ptr[T any](v T) *T { return &v }

// replace sets *p to v for the duration of the test.
func replace[T any](t testing.TB, p *T, v T) {
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

func waitCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustIs(t testing.TB, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %v: want errors.Is(err, %v)", err, target)
		}
	}
}

func mustNotIs(t testing.TB, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if errors.Is(err, target) {
			t.Fatalf("error %v: want !errors.Is(err, %v)", err, target)
		}
	}
}

// sameID reports whether got names want's incarnation: the same PID and start, and the same
// pidfs id when both have one (a handle-less authority has none).
func sameID(got, want procid.ID) bool {
	return got.PID == want.PID && got.Start == want.Start &&
		(got.PidfdID == 0 || want.PidfdID == 0 || got.PidfdID == want.PidfdID)
}
