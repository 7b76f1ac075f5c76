package agent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
)

// TestStdioDescriptors: the client's own descriptors become the child's stdin, stdout and stderr.
func TestStdioDescriptors(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	req := helperStart(t, "upper", mark)
	req["stdio"] = []string{"fd", "fd", "fd"}
	r := c.do(req, inR, outW, errW)
	inR.Close()
	outW.Close()
	errW.Close()
	if !r.ok() {
		t.Fatalf("start: %s", r.raw)
	}
	inW.WriteString("hello\n")
	inW.Close()
	if out, _ := io.ReadAll(outR); string(out) != "HELLO\n" {
		t.Errorf("stdout %q, want HELLO", out)
	}
	if e, _ := io.ReadAll(errR); string(e) != "err\n" {
		t.Errorf("stderr %q, want err", e)
	}
	ev := c.event("exit")
	if ev.num("pid") != r.num("pid") || ev.fields["code"] != 0.0 || ev.fields["signal"] != nil {
		t.Errorf("exit event %s, want pid %d code 0 signal null", ev.raw, r.num("pid"))
	}
}

// TestStdioPipes: pipes the agent makes come back as descriptors, in the order the reply names;
// stderr can be stdout.
func TestStdioPipes(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	req := helperStart(t, "upper", mark)
	req["stdio"] = []string{"pipe", "pipe", "stdout"}
	r := c.do(req)
	if !r.ok() || len(r.fds) != 2 || fmt.Sprint(r.fields["fds"]) != "[stdin stdout]" {
		t.Fatalf("start: %s with %d descriptors", r.raw, len(r.fds))
	}
	r.fds[0].WriteString("abc")
	r.fds[0].Close()
	if out, _ := io.ReadAll(r.fds[1]); string(out) != "err\nABC" {
		t.Errorf("stdout %q, want err and ABC", out)
	}
	r.fds[1].Close()
	c.event("exit")
}

// TestFifos: a client that cannot pass descriptors opens named pipes the agent made.
func TestFifos(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	f := c.do(map[string]any{"op": "fifos", "streams": []string{"stdin", "stdout", "stderr"}})
	if !f.ok() {
		t.Fatalf("fifos: %s", f.raw)
	}
	paths := f.fields["paths"].(map[string]any)
	in, err := os.OpenFile(paths["stdin"].(string), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Open(paths["stdout"].(string))
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Open(paths["stderr"].(string))
	if err != nil {
		t.Fatal(err)
	}
	req := helperStart(t, "upper", mark)
	req["stdio"] = []string{"fifo", "fifo", "fifo"}
	req["fifos"] = f.str("token")
	if r := c.do(req); !r.ok() {
		t.Fatalf("start: %s", r.raw)
	}
	for _, p := range paths {
		if _, err := os.Lstat(p.(string)); err == nil {
			t.Errorf("%s: still there after the start", p)
		}
	}
	in.WriteString("fifo")
	in.Close()
	if b, _ := io.ReadAll(out); string(b) != "FIFO" {
		t.Errorf("stdout %q, want FIFO", b)
	}
	if b, _ := io.ReadAll(errf); string(b) != "err\n" {
		t.Errorf("stderr %q, want err", b)
	}
	c.event("exit")
	req["fifos"] = f.str("token") // used once
	if r := c.do(req); r.code() != "no-such-fifo" {
		t.Errorf("a used token: %s, want no-such-fifo", r.raw)
	}
}

// TestExitSignal: a child killed by a signal is reported so, after the signal's reply; stop and
// signal of an exited child say so without an error.
func TestExitSignal(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	r := c.do(helperStart(t, "hold", mark))
	if !r.ok() {
		t.Fatalf("start: %s", r.raw)
	}
	pid := r.num("pid")
	if s := c.do(map[string]any{"op": "signal", "pid": pid, "signal": "KILL", "target": "leader"}); !s.ok() ||
		s.fields["delivered"] != true {
		t.Fatalf("signal: %s", s.raw)
	}
	ev := c.event("exit")
	if ev.num("pid") != pid || ev.fields["code"] != nil || ev.fields["signal"] != float64(syscall.SIGKILL) {
		t.Errorf("exit event %s, want signal %d", ev.raw, syscall.SIGKILL)
	}
	// A second child, stopped: its exit event comes too, with SIGTERM's number.
	r = c.do(helperStart(t, "hold", mark))
	s := c.do(map[string]any{"op": "stop", "pid": r.num("pid"), "grace": 5})
	if !s.ok() || s.str("outcome") != "exited" || s.fields["requested"] != true || s.fields["forced"] != false {
		t.Errorf("stop: %s", s.raw)
	}
	if ev := c.event("exit"); ev.num("pid") != r.num("pid") || ev.fields["signal"] != float64(syscall.SIGTERM) {
		t.Errorf("exit event %s, want signal %d", ev.raw, syscall.SIGTERM)
	}
	if s := c.do(map[string]any{"op": "stop", "pid": r.num("pid")}); s.code() != "no-such-child" {
		t.Errorf("a stopped child's second stop: %s, want no-such-child", s.raw)
	}
}

// TestMalformedInput: every kind of bad input gets an error reply naming it, and neither the agent
// nor its child notices.
func TestMalformedInput(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	r := c.do(helperStart(t, "hold", mark))
	if !r.ok() {
		t.Fatalf("start: %s", r.raw)
	}
	pid := r.num("pid")
	t.Logf("child %d", pid)
	notExecutable := filepath.Join(testproc.TempDir(t), "data")
	os.WriteFile(notExecutable, []byte("data"), 0o600)
	pr, pw, _ := os.Pipe()
	defer pr.Close()
	defer pw.Close()
	lineReply := func(line []byte, fds ...*os.File) msg {
		t.Helper()
		ch := make(chan msg, 1)
		c.mu.Lock()
		c.waiting["null"] = ch
		c.mu.Unlock()
		c.raw(line, fds...)
		return c.await(ch)
	}
	long := append([]byte(`{"id":"long","op":"ping","pad":"`), bytes.Repeat([]byte("x"), 1<<20)...)
	long = append(long, "\"}\n"...)
	for _, tc := range []struct {
		desc string
		got  func() msg
		code string
	}{
		{"not JSON", func() msg { return lineReply([]byte("{not json\n")) }, "bad-json"},
		{"not an object", func() msg { return lineReply([]byte("[1,2]\n")) }, "bad-json"},
		{"over 1 MiB", func() msg { return lineReply(long) }, "line-too-long"},
		{"over 1 MiB with descriptors", func() msg { return lineReply(long, pr) }, "line-too-long"},
		{"unknown op", func() msg { return c.do(map[string]any{"op": "frobnicate"}) }, "unknown-op"},
		{"no op", func() msg { return c.do(map[string]any{}) }, "unknown-op"},
		{"descriptors with a ping", func() msg { return c.do(map[string]any{"op": "ping"}, pr) }, "fd-mismatch"},
		{"fewer descriptors than fd entries", func() msg {
			req := helperStart(t, "hold", mark)
			req["stdio"] = []string{"fd", "fd", "null"}
			return c.do(req, pr)
		}, "fd-mismatch"},
		{"more descriptors than fd entries", func() msg {
			req := helperStart(t, "hold", mark)
			req["stdio"] = []string{"fd", "null", "null"}
			return c.do(req, pr, pw)
		}, "fd-mismatch"},
		{"unknown pid", func() msg { return c.do(map[string]any{"op": "stop", "pid": 1}) }, "no-such-child"},
		{"pid of the wrong type", func() msg { return c.do(map[string]any{"op": "signal", "pid": "x", "signal": 15}) },
			"bad-request"},
		{"no argv", func() msg { return c.do(map[string]any{"op": "start"}) }, "bad-request"},
		{"a bad stdio entry", func() msg {
			return c.do(map[string]any{"op": "start", "argv": []string{"true"}, "stdio": []string{"tty", "null", "null"}})
		}, "bad-request"},
		{"a bad grace", func() msg {
			return c.do(map[string]any{"op": "start", "argv": []string{"true"}, "grace": -1})
		}, "bad-request"},
		{"a bad signal", func() msg { return c.do(map[string]any{"op": "signal", "pid": pid, "signal": "SIGNOPE"}) },
			"bad-request"},
		{"a program that is not there", func() msg {
			return c.do(map[string]any{"op": "start", "argv": []string{"/nonexistent/program"}})
		}, "not-found"},
		{"a program not in PATH", func() msg {
			return c.do(map[string]any{"op": "start", "argv": []string{"no-such-program-x"}, "env": map[string]string{"PATH": "/nonexistent"}})
		}, "not-found"},
		{"a program that cannot be executed", func() msg {
			return c.do(map[string]any{"op": "start", "argv": []string{notExecutable}})
		}, "permission-denied"},
		{"an unknown fifos token", func() msg {
			return c.do(map[string]any{"op": "start", "argv": []string{"true"}, "stdio": []string{"fifo", "null", "null"},
				"fifos": "f99"})
		}, "no-such-fifo"},
	} {
		got := tc.got()
		if got.ok() || got.code() != tc.code {
			t.Errorf("%s: %s, want error %s", tc.desc, got.raw, tc.code)
		}
		if p := c.do(map[string]any{"op": "ping"}); !p.ok() {
			t.Fatalf("%s: the agent no longer answers a ping: %s", tc.desc, p.raw)
		}
	}
	l := c.do(map[string]any{"op": "list"})
	children, _ := l.fields["children"].([]any)
	if len(children) != 1 || children[0].(map[string]any)["state"] != "running" {
		t.Errorf("list after the bad input: %s, want the one child running", l.raw)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the child: %v after the bad input", err)
	}
}

// TestManyChildren: 200 children at once, all stopped at the client's hang-up.
func TestManyChildren(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t, "--grace", "10s")
	const n = 200
	chans := make([]chan msg, n)
	for i := range chans {
		chans[i] = c.send(helperStart(t, "hold", mark))
	}
	pids := map[int]bool{}
	for _, ch := range chans {
		r := c.await(ch)
		if !r.ok() {
			t.Fatalf("start: %s", r.raw)
		}
		pids[r.num("pid")] = true
	}
	if len(pids) != n {
		t.Fatalf("%d distinct pids, want %d", len(pids), n)
	}
	l := c.do(map[string]any{"op": "list"})
	if children, _ := l.fields["children"].([]any); len(children) != n {
		t.Errorf("list: %d children, want %d", len(children), n)
	}
	if err := c.hangup(); err != nil {
		t.Errorf("the agent after the hang-up: %v, want exit 0", err)
	}
	testproc.NoSurvivors(t, mark, time.Minute)
}

// TestClientKilled: a client SIGKILLed in the middle of a request takes the agent and every
// child's whole tree (a descendant in a session of its own included) with it.
func TestClientKilled(t *testing.T) {
	t.Run("alone", func(t *testing.T) { testClientKilled(t, "alone") })
	// A copy of the client's end, inherited by another process, keeps the connection open: the
	// agent sees its client's end through the handle on its parent.
	t.Run("connection-inherited", func(t *testing.T) { testClientKilled(t, "leak") })
}

func testClientKilled(t *testing.T, how string) {
	testproc.Use("tree") // started by the client helper, for this test
	if how == "leak" {
		testproc.Use("holder")
	}
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	cmd := testproc.Helper(t, "client", "5", ledgerPath(t), how)
	cmd.Env = append(cmd.Env, mark)
	p := testproc.Start(t, cmd)
	agentPID, _ := strconv.Atoi(p.Expect("agent ", time.Minute)[0])
	var pids []int
	for range 5 {
		f := p.Expect("child ", time.Minute)
		for _, s := range f {
			pid, _ := strconv.Atoi(s)
			pids = append(pids, pid)
		}
	}
	p.Expect("mid-request", time.Minute)
	if live, _ := testproc.Marked(mark); len(live) < 1+1+2*5 {
		t.Fatalf("%d marked processes before the kill, want the client, the agent and 10 more", len(live))
	}
	p.Process.Kill()
	p.Wait()
	testproc.NoSurvivors(t, mark, time.Minute)
	for _, pid := range append(pids, agentPID) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
			if env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); bytes.Contains(env, []byte(mark)) {
				t.Errorf("pid %d survived its client", pid)
			}
		}
	}
}

// TestSocket: --socket serves the first client of the user and refuses a second.
func TestSocket(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	dir := testproc.TempDir(t)
	os.Chmod(dir, 0o700)
	path := filepath.Join(dir, "agent.sock")
	cmd := testproc.Helper(t, "custody", "--ledger", ledgerPath(t), "agent", "--socket", path)
	cmd.Env = append(cmd.Env, mark)
	p := testproc.Start(t, cmd)
	if got := p.Expect("ready ", time.Minute); len(got) != 1 || got[0] != path {
		t.Fatalf("ready line %q, want the path", got)
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dec := json.NewDecoder(conn)
	var hello map[string]any
	if err := dec.Decode(&hello); err != nil || hello["event"] != "hello" {
		t.Fatalf("hello: %v %v", hello, err)
	}
	second, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(second)
	second.Close()
	if !strings.Contains(string(b), `"ok":false`) || !strings.Contains(string(b), `"busy"`) {
		t.Errorf("second connection got %q, want a busy error line", b)
	}
	conn.Write([]byte(`{"id":1,"op":"ping"}` + "\n"))
	var pong map[string]any
	if err := dec.Decode(&pong); err != nil || pong["ok"] != true {
		t.Errorf("ping: %v %v", pong, err)
	}
	conn.Close()
	if err := p.Wait(); err != nil {
		t.Errorf("agent after the hang-up: %v", err)
	}
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("the socket's node outlived the agent")
	}
}

// exitOf runs cmd to its end and returns its exit status, its stdout and its stderr.
func exitOf(t *testing.T, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out), errb.String()
}

// TestSocketAcceptWithin: an agent on a socket that no client connects to within --accept-within
// exits with status 3, one line on stderr, its socket's node removed, the ledger untouched.
func TestSocketAcceptWithin(t *testing.T) {
	dir := testproc.TempDir(t)
	os.Chmod(dir, 0o700)
	path := filepath.Join(dir, "agent.sock")
	led := ledgerPath(t)
	code, out, stderr := exitOf(t, testproc.Helper(t, "custody", "--ledger", led, "agent", "--socket", path,
		"--accept-within", "200ms"))
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 3 || len(lines) != 1 || !strings.Contains(lines[0], "no client connected within 200ms") {
		t.Fatalf("agent nobody connected to: exit %d, stderr %q; want 3 and one line saying so", code, stderr)
	}
	if string(out) != "ready "+path+"\n" {
		t.Errorf("stdout %q, want the ready line alone", out)
	}
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("the socket's node outlived the agent")
	}
	if _, err := os.Stat(led); err == nil {
		t.Errorf("the ledger was written by an agent that started nothing")
	}
}

// TestPythonClient: the transcript's client, in Python with the standard library alone.
func TestPythonClient(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		testproc.Skip(t, "no %s: %v", python, err)
	}
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	exe, _ := os.Executable()
	script := filepath.Join(testproc.TempDir(t), "client.py")
	os.WriteFile(script, []byte(pythonClient), 0o600)
	cmd := testproc.Command(t, python, script, exe, ledgerPath(t))
	cmd.Env = append(os.Environ(), mark, testproc.Env("custody"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("python client: %v\n%s", err, out)
	}
	testproc.NoSurvivors(t, mark, time.Minute)
}

// pythonClient starts an agent, runs `echo` with its stdout a passed-back pipe, then starts a
// child with its stdin and stdout the script's own pipes, and hangs up with that child running.
const pythonClient = `
import json, os, socket, subprocess, sys
exe, ledger = sys.argv[1], sys.argv[2]
a, b = socket.socketpair()
agent = subprocess.Popen([exe, "--ledger", ledger, "agent", "--fd", str(b.fileno())], pass_fds=[b.fileno()])
b.close()
buf, fds = b"", []
def message():
    global buf
    while b"\n" not in buf:
        data, got, _, _ = socket.recv_fds(a, 1 << 16, 8)
        if not data:
            raise SystemExit("agent hung up")
        buf += data; fds.extend(got)
    line, buf = buf.split(b"\n", 1)
    return json.loads(line)
hello = message()
assert hello["event"] == "hello" and hello["protocol"] == 1, hello
a.sendall(json.dumps({"id": 1, "op": "start", "argv": ["sh", "-c", "echo hi"], "stdio": ["null", "pipe", "inherit"]}).encode() + b"\n")
r = message()
assert r["ok"] and r["fds"] == ["stdout"] and len(fds) == 1, (r, fds)
assert os.read(fds.pop(), 100) == b"hi\n"
e = message()
assert e["event"] == "exit" and e["code"] == 0 and e["signal"] is None, e
ir, iw = os.pipe()
or_, ow = os.pipe()
socket.send_fds(a, [json.dumps({"id": "cat", "op": "start", "argv": ["cat"], "stdio": ["fd", "fd", "inherit"]}).encode() + b"\n"], [ir, ow])
os.close(ir); os.close(ow)
r = message()
assert r["ok"] and r["id"] == "cat", r
os.write(iw, b"through\n")
assert os.read(or_, 100) == b"through\n"
a.close()
assert agent.wait() == 0
print("ok")
`

// TestRelease: a running child is not released (it would outlive its owner uncovered); one whose
// scope is empty is, and the agent forgets it.
func TestRelease(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	r := c.do(helperStart(t, "hold", mark))
	pid := r.num("pid")
	if rel := c.do(map[string]any{"op": "release", "pid": pid}); rel.code() != "running" {
		t.Errorf("release of a running child: %s, want running", rel.raw)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the child after a refused release: %v", err)
	}
	c.do(map[string]any{"op": "signal", "pid": pid, "signal": 9})
	c.event("exit")
	testproc.WaitFor(t, time.Minute, func() error {
		rel := c.do(map[string]any{"op": "release", "pid": pid})
		if rel.ok() || rel.code() == "no-such-child" { // released by itself once its scope was seen empty
			return nil
		}
		return fmt.Errorf("release after the exit: %s", rel.raw)
	})
	if l := c.do(map[string]any{"op": "list"}); len(l.fields["children"].([]any)) != 0 {
		t.Errorf("list after the release: %s", l.raw)
	}
}

// TestGrantAdopt: one agent grants its child, another adopts it; the giver says handed and
// forgets it, and the child dies with the new owner's client.
func TestGrantAdopt(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	led := ledgerPath(t)
	giver := startAgent(t, "--ledger", led)
	receiver := startAgent(t, "--ledger", led)
	req := helperStart(t, "hold", mark)
	req["stdio"] = []string{"null", "null", "null"} // it outlives the giver, whose stderr the test reads
	r := giver.do(req)
	pid := r.num("pid")
	g := giver.do(map[string]any{"op": "grant", "pid": pid, "ttl": 60})
	if !g.ok() || g.str("grant") == "" {
		t.Fatalf("grant: %s", g.raw)
	}
	a := receiver.do(map[string]any{"op": "adopt", "grant": g.str("grant"), "grace": 2})
	if !a.ok() || a.num("pid") != pid {
		t.Fatalf("adopt: %s", a.raw)
	}
	if h := giver.event("handed"); h.num("pid") != pid || h.num("receiver") != receiver.hello.num("pid") {
		t.Errorf("handed event %s, want pid %d and the receiver %d", h.raw, pid, receiver.hello.num("pid"))
	}
	if s := giver.do(map[string]any{"op": "stop", "pid": pid}); s.code() != "no-such-child" {
		t.Errorf("the giver's stop after the hand-over: %s, want no-such-child", s.raw)
	}
	if again := receiver.do(map[string]any{"op": "adopt", "grant": g.str("grant")}); again.code() != "grant-refused" {
		t.Errorf("a used grant: %s, want grant-refused", again.raw)
	}
	if err := giver.hangup(); err != nil {
		t.Errorf("giver: %v", err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the adopted child died with its giver: %v", err)
	}
	if err := receiver.hangup(); err != nil {
		t.Errorf("receiver: %v", err)
	}
	testproc.NoSurvivors(t, mark, time.Minute)
}

// TestOrphansReaped: a descendant whose parent exits is re-parented to the agent, its
// subreaper, and reaped by it when it exits: no zombie stays behind.
func TestOrphansReaped(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	req := helperStart(t, "orphan", mark)
	out, w, _ := os.Pipe()
	req["stdio"] = []string{"null", "fd", "inherit"}
	if r := c.do(req, w); !r.ok() {
		t.Fatalf("start: %s", r.raw)
	}
	w.Close()
	b, _ := io.ReadAll(out) // the orphan's PID; EOF once it and its parent have exited
	orphan, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("orphan helper said %q", b)
	}
	c.event("exit")
	agent := strconv.Itoa(c.hello.num("pid"))
	testproc.WaitFor(t, time.Minute, func() error {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", orphan))
		if err != nil {
			return fmt.Errorf("the orphan %d exited before it was seen re-parented: %v", orphan, err)
		}
		if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); f[1] != agent {
			return fmt.Errorf("the orphan's parent is %s, not the agent %s", f[1], agent)
		}
		return nil
	})
	testproc.WaitFor(t, time.Minute, func() error {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", orphan))
		if err != nil {
			return nil // reaped
		}
		return fmt.Errorf("the orphan %d is not reaped: %s", orphan, st)
	})
}

// TestUsage: bad flags and a transport that cannot be set up get one error line and their exit
// status, and start nothing.
func TestUsage(t *testing.T) {
	led := ledgerPath(t)
	open := filepath.Join(testproc.TempDir(t), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	notSocket, _ := os.Open(os.DevNull)
	defer notSocket.Close()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"agent"}, 2},
		{[]string{"agent", "--fd", "3", "--socket", "x"}, 2},
		{[]string{"agent", "--fd", "1"}, 2},
		{[]string{"agent", "--fd", "3", "--grace", "0s"}, 2},
		{[]string{"agent", "--fd", "3", "extra"}, 2},
		{[]string{"agent", "--fd", "3", "--accept-within", "1s"}, 2}, // only a socket waits for its client
		{[]string{"agent", "--socket", "x", "--accept-within", "-1s"}, 2},
		{[]string{"agent", "--fd", "3"}, 1},                          // descriptor 3 is not a socket
		{[]string{"agent", "--fd", "9"}, 1},                          // nor open
		{[]string{"agent", "--socket", filepath.Join(open, "s")}, 1}, // a directory others can write
	} {
		cmd := testproc.Helper(t, "custody", append([]string{"--ledger", led}, tc.args...)...)
		cmd.ExtraFiles = []*os.File{notSocket}
		code, out, stderr := exitOf(t, cmd)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != tc.code || len(lines) != 1 || !strings.HasPrefix(lines[0], "custody: error: ") || len(out) != 0 {
			t.Errorf("custody %q: exit %d, stderr %q, stdout %q; want exit %d and one error line", tc.args, code,
				stderr, out, tc.code)
		}
	}
	if _, err := os.Stat(led); err == nil {
		t.Errorf("the ledger was written by a refused agent")
	}
	if entries, _ := os.ReadDir(open); len(entries) != 0 {
		t.Errorf("a refused --socket left %v", entries)
	}
}

// TestLostCover: the supervisor's death is told as lost-cover, its replacement as covered, and
// the child is covered again: the agent's own SIGKILL then takes it with it.
func TestLostCover(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	r := c.do(helperStart(t, "hold", mark))
	child := r.num("pid")
	sup := 0
	testproc.WaitFor(t, time.Minute, func() error {
		for _, pid := range childrenOf(c.agent.Process.Pid) {
			if pid != child {
				sup = pid
				return nil
			}
		}
		return errors.New("no supervisor among the agent's children")
	})
	// The supervisor is the agent's child, a process of this test's tree: signalled through a
	// pidfd, proven by its parent read after the pidfd was opened.
	pidfd, err := unix.PidfdOpen(sup, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	if !slices.Contains(childrenOf(c.agent.Process.Pid), sup) {
		t.Fatalf("pid %d is no longer the agent's child", sup)
	}
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	if m := c.event("lost-cover"); m.str("message") == "" {
		t.Errorf("lost-cover without a message: %s", m.raw)
	}
	c.event("covered")
	c.agent.Process.Kill()
	testproc.NoSurvivors(t, mark, time.Minute)
}

// childrenOf lists pid's children.
func childrenOf(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// TestStartFields: argv[0] is looked up in the PATH of env, the child gets env (and the spawn tag,
// in tag_env's variable, naming purpose) and cwd; late requests about an exited child are answered
// as for an exited child.
func TestStartFields(t *testing.T) {
	c := startAgent(t)
	dir := testproc.TempDir(t)
	for _, tc := range []struct {
		tagEnv, want string
	}{{"", "CUSTODY_SPAWN=v1:"}, {"HERMES_SPAWN", "HERMES_SPAWN=v1:"}} {
		req := map[string]any{"op": "start", "argv": []string{"sh", "-c", "pwd; env"}, "cwd": dir, "purpose": "mcp-helper",
			"env": map[string]string{"PATH": "/usr/bin:/bin", "FOO": "bar"}, "stdio": []string{"null", "pipe", "inherit"}}
		if tc.tagEnv != "" {
			req["tag_env"] = tc.tagEnv
		}
		r := c.do(req)
		if !r.ok() || len(r.fds) != 1 {
			t.Fatalf("start: %s", r.raw)
		}
		out, _ := io.ReadAll(r.fds[0])
		r.fds[0].Close()
		got := strings.Split(strings.TrimSpace(string(out)), "\n")
		if got[0] != dir || !slices.Contains(got, "FOO=bar") || slices.Contains(got, "HOME="+os.Getenv("HOME")) {
			t.Errorf("child's cwd and env %q, want %s, FOO=bar and nothing of the agent's", got, dir)
		}
		tagged := false
		for _, kv := range got {
			if strings.HasPrefix(kv, tc.want) && strings.Contains(kv, ":mcp-helper:") {
				tagged = true
			}
		}
		if !tagged {
			t.Errorf("tag_env %q: no %s…:mcp-helper: tag in %q", tc.tagEnv, tc.want, got)
		}
		c.event("exit")
		pid := r.num("pid")
		testproc.WaitFor(t, time.Minute, func() error {
			if l := c.do(map[string]any{"op": "list"}); len(l.fields["children"].([]any)) != 0 {
				return fmt.Errorf("list still has the exited child: %s", l.raw)
			}
			return nil
		})
		if s := c.do(map[string]any{"op": "signal", "pid": pid, "signal": "TERM"}); !s.ok() || s.fields["delivered"] != false {
			t.Errorf("signal after the exit: %s, want delivered false", s.raw)
		}
		if s := c.do(map[string]any{"op": "stop", "pid": pid}); !s.ok() || s.str("outcome") != "already-exited" {
			t.Errorf("stop after the exit: %s, want already-exited", s.raw)
		}
	}
	if r := c.do(map[string]any{"op": "start", "argv": []string{"true"}, "cwd": "/nonexistent"}); r.code() != "bad-request" {
		t.Errorf("a cwd that is not there: %s, want bad-request", r.raw)
	}
}

// TestProcessGroupPath: an agent that gets no cgroup (an ordinary user's, here uid 65534) gives
// its children process groups, gated until covered, and stops them at its client's hang-up.
func TestProcessGroupPath(t *testing.T) {
	testproc.RequireRoot(t)
	const nobody = 65534
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	dir := testproc.TempDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyExe := filepath.Join(dir, "agent.test")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyExe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "state"), 0o700)
	for _, p := range []string{filepath.Dir(dir), dir, filepath.Join(dir, "state"), copyExe} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	conn, theirs := socketpair(t)
	cmd := testproc.Command(t, copyExe, "--ledger", filepath.Join(dir, "state", "spawn-ledger.json"), "agent", "--fd", "3")
	cmd.Env = append(os.Environ(), testproc.Env("custody"), mark)
	cmd.Dir = dir
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	cmd.ExtraFiles = []*os.File{theirs}
	c := &client{t: t, conn: conn, agent: cmd, done: make(chan error, 1), waiting: map[string]chan msg{},
		events: make(chan msg, 1024), stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		conn.Close()
		<-c.done
		t.Logf("agent stderr: %s", c.stderr.String())
	})
	go c.readLoop()
	c.hello = c.event("hello")
	if got := c.hello.str("containment"); got != "process-group" {
		testproc.Skip(t, "uid %d gets %q here, not process groups", nobody, got)
	}
	req := helperStart(t, "hold", mark)
	req["argv"] = []string{copyExe}
	req["stdio"] = []string{"null", "null", "null"}
	r := c.do(req)
	if !r.ok() || r.str("containment") != "process-group" || r.num("pgid") != r.num("pid") {
		t.Fatalf("start: %s, want a process group the child leads", r.raw)
	}
	if err := c.hangup(); err != nil {
		t.Errorf("the agent after the hang-up: %v (stderr %s)", err, c.stderr.String())
	}
	testproc.NoSurvivors(t, mark, time.Minute)
}

// TestDescriptorsAmongLines: starts that pass descriptors, each right behind a line without any,
// which the kernel often hands the agent in one read with the start's descriptors: each start
// gets its own.
func TestDescriptorsAmongLines(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	var chans []chan msg
	var outs []*os.File
	for range 30 {
		c.send(map[string]any{"op": "ping"})
		r, w, _ := os.Pipe()
		req := helperStart(t, "upper", mark)
		req["stdio"] = []string{"null", "fd", "null"}
		chans = append(chans, c.send(req, w))
		w.Close()
		outs = append(outs, r)
	}
	for i, ch := range chans {
		if r := c.await(ch); !r.ok() {
			t.Errorf("start %d: %s", i, r.raw)
			continue
		}
		if b, _ := io.ReadAll(outs[i]); len(b) != 0 {
			t.Errorf("start %d: stdout %q, want nothing (its stdin is the null device)", i, b)
		}
		outs[i].Close()
	}
}

// TestStdioNull: "null" is the null device, opened for the child, not a closed descriptor.
func TestStdioNull(t *testing.T) {
	c := startAgent(t)
	r := c.do(map[string]any{"op": "start", "argv": []string{"sh", "-c", "readlink /proc/self/fd/0 /proc/self/fd/2"},
		"stdio": []string{"null", "pipe", "null"}})
	if !r.ok() || len(r.fds) != 1 {
		t.Fatalf("start: %s", r.raw)
	}
	out, _ := io.ReadAll(r.fds[0])
	r.fds[0].Close()
	if string(out) != "/dev/null\n/dev/null\n" {
		t.Errorf("stdin and stderr are %q, want /dev/null twice", out)
	}
	c.event("exit")
}

// TestFifosWithdrawn: a token no start uses within its 10 s is withdrawn: its nodes go, and a
// start that names it later is answered no-such-fifo.
func TestFifosWithdrawn(t *testing.T) {
	c := startAgent(t)
	f := c.do(map[string]any{"op": "fifos", "streams": []string{"stdout"}})
	if !f.ok() {
		t.Fatalf("fifos: %s", f.raw)
	}
	path := f.fields["paths"].(map[string]any)["stdout"].(string)
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("%s: %v, want a named pipe", path, err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the fifos' directory: %v, want mode 0700", err)
	}
	testproc.WaitFor(t, time.Minute, func() error {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%s still there", path)
		}
		return nil
	})
	r := c.do(map[string]any{"op": "start", "argv": []string{"true"}, "stdio": []string{"null", "fifo", "null"},
		"fifos": f.str("token")})
	if r.code() != "no-such-fifo" {
		t.Errorf("a withdrawn token: %s, want no-such-fifo", r.raw)
	}
}

// TestRowNamesClient: a child's row records the agent's client as the process its owner serves
// (caller_pid), as a row of custody run records its caller; the owner field stays the agent's.
func TestRowNamesClient(t *testing.T) {
	c := startAgent(t)
	r := c.do(map[string]any{"op": "start", "argv": []string{"cat"}, "stdio": []string{"pipe", "null", "null"}})
	if !r.ok() || len(r.fds) != 1 {
		t.Fatalf("start: %s", r.raw)
	}
	defer r.fds[0].Close() // cat's stdin: its end ends cat
	data, err := os.ReadFile(c.ledger)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		PID       int  `json:"pid"`
		Owner     *int `json:"owner"`
		CallerPID *int `json:"caller_pid"`
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatalf("ledger: %v", err)
	}
	pid := int(r.num("pid"))
	for _, row := range rows {
		if row.PID != pid {
			continue
		}
		if row.CallerPID == nil || *row.CallerPID != os.Getpid() {
			t.Errorf("caller_pid %v, want the client, pid %d", row.CallerPID, os.Getpid())
		}
		if row.Owner == nil || *row.Owner != c.agent.Process.Pid {
			t.Errorf("owner %v, want the agent, pid %d", row.Owner, c.agent.Process.Pid)
		}
		return
	}
	t.Fatalf("no row for pid %d in %s", pid, data)
}

// TestListAfterExit: once the client has read a child's exit event, list says the child exited,
// even while members of its scope remain and the agent is still busy with it (here a stop waits
// out its grace on a member that ignores the request to exit).
func TestListAfterExit(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	req := helperStart(t, "hold", mark)
	req["argv"] = []string{"/bin/sh", "-c", `trap 'exit 5' TERM; /bin/sh -c 'trap "" TERM; echo; exec sleep 600' & read x; wait`}
	out, w, _ := os.Pipe()
	req["stdio"] = []string{"null", "fd", "null"}
	r := c.do(req, w)
	w.Close()
	if !r.ok() {
		t.Fatalf("start: %s", r.raw)
	}
	pid := r.num("pid")
	if _, err := out.Read(make([]byte, 1)); err != nil { // the member ignores SIGTERM from here on
		t.Fatal(err)
	}
	stopped := c.send(map[string]any{"op": "stop", "pid": pid, "grace": 5})
	if ev := c.event("exit"); ev.num("pid") != pid || ev.fields["code"] != 5.0 {
		t.Fatalf("exit event %s; want pid %d, code 5", ev.raw, pid)
	}
	l := c.do(map[string]any{"op": "list"})
	children, _ := l.fields["children"].([]any)
	if len(children) != 1 || children[0].(map[string]any)["state"] != "exited" {
		t.Errorf("list after the exit event: %s; want the child, exited", l.raw)
	}
	if s := c.await(stopped); s.str("outcome") != "exited" || s.fields["forced"] != true {
		t.Errorf("stop: %s; want exited, forced", s.raw)
	}
}

// TestExitStatusesWhileReaping: many short children started through the agent while it reaps
// the orphans of others: every exit event carries its child's own status, which the agent's
// orphan reaper never takes from the child's waiter.
func TestExitStatusesWhileReaping(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	c := startAgent(t)
	want := map[int]float64{}
	var replies []chan msg
	for i := range 40 {
		req := helperStart(t, "hold", mark)
		req["argv"] = []string{"/bin/sh", "-c", fmt.Sprintf("(/bin/sh -c 'exit 9' &); exit %d", 10+i)}
		req["stdio"] = []string{"null", "null", "null"}
		replies = append(replies, c.send(req))
	}
	for i, ch := range replies {
		r := c.await(ch)
		if !r.ok() {
			t.Fatalf("start: %s", r.raw)
		}
		want[r.num("pid")] = float64(10 + i)
	}
	for range want {
		ev := c.event("exit")
		if code, ok := want[ev.num("pid")]; !ok || ev.fields["code"] != code {
			t.Errorf("exit event %s; want pid of a child started and its code %v", ev.raw, code)
		}
	}
}

// TestSocketLateClient: a --socket client that started after the agent is served, watched
// through its connection alone, and the agent says so on stderr as what it is, not as a reused
// PID; the client's end ends the agent.
func TestSocketLateClient(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		testproc.Skip(t, "no %s: %v", python, err)
	}
	dir := testproc.TempDir(t)
	os.Chmod(dir, 0o700)
	path := filepath.Join(dir, "agent.sock")
	cmd := testproc.Helper(t, "custody", "--ledger", ledgerPath(t), "agent", "--socket", path)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	p := testproc.Start(t, cmd)
	p.Expect("ready ", time.Minute)
	// A client started within the agent's own clock tick is proven by its start after all: let
	// the clock (/proc/uptime, in ticks of 1/100 s as /proc/PID/stat's start) pass the agent's.
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	start, _ := strconv.ParseFloat(strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))[19], 64)
	testproc.WaitFor(t, time.Minute, func() error {
		b, err := os.ReadFile("/proc/uptime")
		if err != nil {
			return err
		}
		if up, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64); up*100 < start+2 {
			return fmt.Errorf("uptime %v s, the agent started at tick %v", up, start)
		}
		return nil
	})
	client := testproc.Command(t, python, "-c", `import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(s.makefile().readline()[:16])`, path)
	if out, err := client.Output(); err != nil || !strings.Contains(string(out), `"event":"hello"`) {
		t.Fatalf("late client: %v %q", err, out)
	}
	if err := p.Wait(); err != nil {
		t.Errorf("agent after the late client's end: %v", err)
	}
	if s := stderr.String(); !strings.Contains(s, "started after the agent") || strings.Contains(s, "reused") {
		t.Errorf("agent stderr %q; want it to say the client started after it, and nothing of a reused PID", s)
	}
}
