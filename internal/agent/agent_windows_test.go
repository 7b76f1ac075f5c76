package agent_test

// The agent on Windows, tested as a program under Wine or Windows: the test binary re-executed as
// custody (the "custody" helper) serves a client this test plays over the named pipe, and the
// children it starts are the test binary again, as helpers.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/windows"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/cli"
	"github.com/custody-dev/custody/internal/testproc"
)

func TestMain(m *testing.M) {
	custody.Init()
	testproc.Register("custody", func([]string) int { return cli.Main() })
	// hold runs until it is killed, or its stdin ends.
	testproc.Register("hold", func([]string) int {
		time.Sleep(time.Hour)
		return 0
	})
	// upper copies stdin to stdout in capitals.
	testproc.Register("upper", func([]string) int {
		b, _ := io.ReadAll(os.Stdin)
		os.Stdout.Write([]byte(strings.ToUpper(string(b))))
		return 0
	})
	// tree starts a hold helper below itself, prints its PID, and holds.
	testproc.Register("tree", func([]string) int {
		exe, _ := os.Executable()
		c := exec.Command(exe)
		c.Env = append(os.Environ(), testproc.Env("hold"))
		if err := c.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("descendant", c.Process.Pid)
		time.Sleep(time.Hour)
		return 0
	})
	// client connects to the agent's pipe (argv[0]), starts a tree child, prints "child PID" and
	// "descendant PID" and waits to be killed: a client that started after the agent.
	testproc.Register("client", func(args []string) int {
		c, err := dialPipe(args[0])
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		r := bufio.NewReader(c)
		r.ReadString('\n') // hello
		req, _ := json.Marshal(map[string]any{"id": 1, "op": "start", "argv": []string{args[1]},
			"env": envWith("tree"), "stdio": []string{"null", "pipe", "null"}})
		c.Write(append(req, '\n'))
		line, _ := r.ReadString('\n')
		var rep struct {
			PID     int      `json:"pid"`
			Handles []uint64 `json:"handles"`
		}
		if json.Unmarshal([]byte(line), &rep); len(rep.Handles) != 1 {
			fmt.Println("error", line)
			return 1
		}
		out := bufio.NewReader(os.NewFile(uintptr(rep.Handles[0]), "stdout"))
		d, _ := out.ReadString('\n')
		fmt.Println("child", rep.PID)
		fmt.Print(d)
		time.Sleep(time.Hour)
		return 0
	})
	testproc.Main(m)
}

var pipes atomic.Int32

// pipeName is a fresh pipe name for one test.
func pipeName() string {
	return fmt.Sprintf(`\\.\pipe\custody-agent-test-%d-%d`, os.Getpid(), pipes.Add(1))
}

// dialPipe opens the client end of the agent's pipe, overlapped, so that reads take deadlines.
func dialPipe(name string) (*os.File, error) {
	n16, _ := windows.UTF16PtrFromString(name)
	h, err := windows.CreateFile(n16, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil, windows.OPEN_EXISTING,
		windows.FILE_FLAG_OVERLAPPED, 0)
	if err != nil {
		return nil, os.NewSyscallError("CreateFile", err)
	}
	return os.NewFile(uintptr(h), name), nil
}

// envWith is the test's environment running the named helper.
func envWith(helper string) map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if k != "" {
			env[k] = v
		}
	}
	k, v, _ := strings.Cut(testproc.Env(helper), "=")
	env[k] = v
	return env
}

// agent is a started `custody agent --socket`, before or after its client connected.
type agent struct {
	t      *testing.T
	p      *testproc.Proc
	name   string
	ledger string
}

func startAgent(t *testing.T) *agent {
	t.Helper()
	name, led := pipeName(), ledgerPath(t)
	cmd := testproc.Helper(t, "custody", "--ledger", led, "agent", "--socket", name, "--grace", "1s")
	p := testproc.Start(t, cmd)
	if got := p.Line(time.Minute); got != "ready "+name {
		t.Fatalf("agent said %q, want ready %s", got, name)
	}
	return &agent{t: t, p: p, name: name, ledger: led}
}

func ledgerPath(t *testing.T) string { return testproc.TempDir(t) + `\state\spawn-ledger.json` }

// exit waits for the agent's exit and returns its code.
func (a *agent) exit() int {
	a.t.Helper()
	err := a.p.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode()
	}
	if err != nil {
		a.t.Fatal(err)
	}
	return 0
}

// checkRow checks that pid's row names the test, the client, as the process its owner serves.
func (a *agent) checkRow(pid int) {
	a.t.Helper()
	data, err := os.ReadFile(a.ledger)
	if err != nil {
		a.t.Fatal(err)
	}
	var rows []struct {
		PID         int    `json:"pid"`
		CallerPID   *int   `json:"caller_pid"`
		Containment string `json:"containment"`
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		a.t.Fatalf("ledger: %v", err)
	}
	for _, r := range rows {
		if r.PID == pid {
			if r.CallerPID == nil || *r.CallerPID != os.Getpid() || r.Containment != "job" {
				a.t.Errorf("row of pid %d: caller_pid %v, containment %q; want %d, job", pid, r.CallerPID, r.Containment, os.Getpid())
			}
			return
		}
	}
	a.t.Errorf("no row for pid %d in %s", pid, data)
}

// client is the test as the agent's client.
type client struct {
	t     *testing.T
	f     *os.File
	r     *bufio.Reader
	next  int
	hello map[string]any
	// events holds events read while awaiting a reply.
	events []map[string]any
}

func (a *agent) connect() *client {
	a.t.Helper()
	f, err := dialPipe(a.name)
	if err != nil {
		a.t.Fatal(err)
	}
	c := &client{t: a.t, f: f, r: bufio.NewReader(f)}
	a.t.Cleanup(func() { f.Close() })
	c.hello = c.read()
	if c.hello["event"] != "hello" {
		a.t.Fatalf("first message %v, want a hello", c.hello)
	}
	return c
}

func (c *client) read() map[string]any {
	c.t.Helper()
	c.f.SetReadDeadline(time.Now().Add(time.Minute))
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read from the agent: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		c.t.Fatalf("agent sent a line that is not JSON: %q", line)
	}
	return m
}

func (c *client) raw(line string) {
	c.t.Helper()
	if _, err := c.f.Write([]byte(line)); err != nil {
		c.t.Fatal(err)
	}
}

// do sends req and returns its reply, keeping the events read meanwhile.
func (c *client) do(req map[string]any) map[string]any {
	c.t.Helper()
	c.next++
	req["id"] = c.next
	b, _ := json.Marshal(req)
	c.raw(string(b) + "\n")
	for {
		m := c.read()
		if _, ok := m["event"]; ok {
			c.events = append(c.events, m)
			continue
		}
		if id, _ := m["id"].(float64); int(id) == c.next {
			return m
		}
		c.t.Fatalf("a reply nobody asked for: %v", m)
	}
}

// event returns the next event named name.
func (c *client) event(name string) map[string]any {
	c.t.Helper()
	for {
		var m map[string]any
		if len(c.events) > 0 {
			m, c.events = c.events[0], c.events[1:]
		} else {
			m = c.read()
		}
		if m["event"] == name {
			return m
		}
	}
}

func code(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func num(m map[string]any, k string) int { f, _ := m[k].(float64); return int(f) }

// start starts the named helper with stdio.
func (c *client) start(helper string, stdio []string, extra map[string]any) map[string]any {
	c.t.Helper()
	exe, _ := os.Executable()
	req := map[string]any{"op": "start", "argv": []string{exe}, "env": envWith(helper), "stdio": stdio}
	for k, v := range extra {
		req[k] = v
	}
	rep := c.do(req)
	if rep["ok"] != true {
		c.t.Fatalf("start %s: %v", helper, rep)
	}
	return rep
}

// openPID opens a process the test is to see end, as soon as it learns its PID (the agent
// holds it meanwhile, so the PID names it).
func openPID(t *testing.T, pid int) windows.Handle {
	t.Helper()
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		t.Fatalf("open pid %d: %v", pid, err)
	}
	t.Cleanup(func() {
		windows.TerminateProcess(h, 1) // a failed test's survivor, by its handle
		windows.CloseHandle(h)
	})
	return h
}

// gone waits for the process behind h to end.
func gone(t *testing.T, h windows.Handle, what string) {
	t.Helper()
	ev, err := windows.WaitForSingleObject(h, uint32((2 * time.Minute).Milliseconds()))
	if err != nil || ev != windows.WAIT_OBJECT_0 {
		t.Fatalf("%s still runs 2 minutes on (%v, %v)", what, ev, err)
	}
}

// descendant opens the descendant a tree child started, which it names on its stdout, the one
// handle of the start's reply.
func descendant(t *testing.T, rep map[string]any) windows.Handle {
	t.Helper()
	hs, _ := rep["handles"].([]any)
	if len(hs) != 1 {
		t.Fatalf("start reply %v: want one handle", rep)
	}
	out := os.NewFile(uintptr(hs[0].(float64)), "stdout")
	t.Cleanup(func() { out.Close() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	d, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "descendant ")))
	if err != nil {
		t.Fatalf("tree said %q", line)
	}
	return openPID(t, d)
}

func TestWindowsHello(t *testing.T) {
	a := startAgent(t)
	c := a.connect()
	caps, _ := c.hello["capabilities"].([]any)
	if !slices.Contains(caps, any("handles")) || slices.Contains(caps, any("fds")) {
		t.Errorf("capabilities %v: want handles and not fds", caps)
	}
	if c.hello["containment"] != "job" || num(c.hello, "protocol") != 1 {
		t.Errorf("hello %v: want containment job, protocol 1", c.hello)
	}
	if rep := c.do(map[string]any{"op": "ping"}); rep["ok"] != true {
		t.Errorf("ping: %v", rep)
	}
	// The DACL is read back as the pipe holds it; Wine keeps it but checks no open against it
	// (see the agent's transport), so what it admits is not tried here.
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		t.Fatal(err)
	}
	sd, err := windows.GetSecurityInfo(windows.Handle(c.f.Fd()), windows.SE_KERNEL_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if want := "D:P(A;;GA;;;" + tu.User.Sid.String() + ")"; err != nil || sd.String() != want {
		t.Errorf("the pipe's DACL %v (%v), want %s", sd, err, want)
	}
	c.f.Close()
	if got := a.exit(); got != 0 {
		t.Errorf("agent exited %d after the hang-up, want 0", got)
	}
}

// TestWindowsHandles passes stdin in as the client's handle and takes stdout back as a handle
// duplicated into the client.
func TestWindowsHandles(t *testing.T) {
	a := startAgent(t)
	c := a.connect()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rep := c.start("upper", []string{"fd", "pipe", "null"}, map[string]any{"handles": []uint64{uint64(r.Fd())}})
	r.Close() // the child has the agent's copy; the test's must go for the child to see EOF
	hs, _ := rep["handles"].([]any)
	fds, _ := rep["fds"].([]any)
	if len(hs) != 1 || len(fds) != 1 || fds[0] != "stdout" {
		t.Fatalf("start reply %v: want one handle, for stdout", rep)
	}
	out := os.NewFile(uintptr(hs[0].(float64)), "stdout")
	defer out.Close()
	a.checkRow(num(rep, "pid"))
	w.Write([]byte("hi there"))
	w.Close()
	got, err := io.ReadAll(out)
	if err != nil || string(got) != "HI THERE" {
		t.Errorf("child's stdout %q (%v), want HI THERE", got, err)
	}
	ev := c.event("exit")
	if num(ev, "pid") != num(rep, "pid") || ev["code"] != float64(0) {
		t.Errorf("exit event %v: want pid %d code 0", ev, num(rep, "pid"))
	}
}

func TestWindowsSignalStop(t *testing.T) {
	a := startAgent(t)
	c := a.connect()
	rep := c.start("hold", []string{"null", "null", "null"}, nil)
	pid := num(rep, "pid")
	if rep["containment"] != "job" {
		t.Errorf("start reply %v: want containment job", rep)
	}
	h := openPID(t, pid)
	if got := c.do(map[string]any{"op": "signal", "pid": pid, "signal": "SIGTERM"}); code(got) != "unsupported" {
		t.Errorf("signal SIGTERM: %v, want unsupported (a stop is the request to exit here)", got)
	}
	if got := c.do(map[string]any{"op": "signal", "pid": pid, "signal": "KILL"}); got["delivered"] != true {
		t.Errorf("signal KILL: %v, want delivered", got)
	}
	gone(t, h, "the killed child")
	if ev := c.event("exit"); num(ev, "pid") != pid || ev["code"] != float64(1) {
		t.Errorf("exit event %v: want pid %d, code 1 (TerminateJobObject's)", ev, pid)
	}

	rep = c.start("tree", []string{"null", "pipe", "null"}, nil)
	pid = num(rep, "pid")
	h = openPID(t, pid)
	dh := descendant(t, rep)
	got := c.do(map[string]any{"op": "stop", "pid": pid, "grace": 1})
	if got["ok"] != true || got["outcome"] != "exited" {
		t.Errorf("stop: %v, want exited", got)
	}
	gone(t, h, "the stopped child")
	gone(t, dh, "the stopped child's descendant")
	if got := c.do(map[string]any{"op": "stop", "pid": pid}); code(got) != "no-such-child" {
		t.Errorf("stop again: %v, want no-such-child", got)
	}
}

func TestWindowsSecondClientRefused(t *testing.T) {
	a := startAgent(t)
	c := a.connect()
	_, err := dialPipe(a.name)
	if !errors.Is(err, windows.ERROR_PIPE_BUSY) {
		t.Errorf("a second client: %v, want ERROR_PIPE_BUSY", err)
	}
	// A second agent on the name: FILE_FLAG_FIRST_PIPE_INSTANCE refuses a name that exists.
	second := testproc.Helper(t, "custody", "--ledger", ledgerPath(t), "agent", "--socket", a.name)
	out, err := second.CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 {
		t.Errorf("a second agent on %s: %v (%s), want exit 1", a.name, err, out)
	}
	if rep := c.do(map[string]any{"op": "ping"}); rep["ok"] != true {
		t.Errorf("the first client after a second's try: %v", rep)
	}
}

// TestWindowsBadInput: each bad line gets its error, and the agent and its child go on.
func TestWindowsBadInput(t *testing.T) {
	a := startAgent(t)
	c := a.connect()
	rep := c.start("hold", []string{"null", "null", "null"}, nil)
	h := openPID(t, num(rep, "pid"))
	c.raw("this is not json\n")
	if m := c.read(); code(m) != "bad-json" {
		t.Errorf("not JSON: %v", m)
	}
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		req  map[string]any
		want string
	}{
		{map[string]any{"op": "launch"}, "unknown-op"},
		{map[string]any{"op": "start", "argv": []string{"x"}, "stdio": []string{"fd", "null", "null"}}, "fd-mismatch"},
		{map[string]any{"op": "start", "argv": []string{"x"}, "stdio": []string{"null", "null", "null"},
			"handles": []uint64{uint64(r.Fd())}}, "fd-mismatch"},
		{map[string]any{"op": "start", "argv": []string{"x"}, "stdio": []string{"fd", "null", "null"},
			"handles": []uint64{0x7ffffff0}}, "fd-mismatch"},
		{map[string]any{"op": "start", "argv": []string{`C:\no\such\program.exe`}}, "not-found"},
		{map[string]any{"op": "fifos", "streams": []string{"stdin"}}, "unsupported"},
		{map[string]any{"op": "stop", "pid": 999999}, "no-such-child"},
		{map[string]any{"op": "signal", "pid": num(rep, "pid"), "signal": "SIGHUP"}, "unsupported"},
		{map[string]any{"op": "signal", "pid": num(rep, "pid"), "signal": "SIGNOPE"}, "bad-request"},
	} {
		if got := c.do(tc.req); code(got) != tc.want {
			t.Errorf("%v: %v, want %s", tc.req, got, tc.want)
		}
	}
	if ev, _ := windows.WaitForSingleObject(h, 0); ev == windows.WAIT_OBJECT_0 {
		t.Errorf("the child ended under bad input")
	}
	if got := c.do(map[string]any{"op": "list"}); len(got["children"].([]any)) != 1 {
		t.Errorf("list after bad input: %v, want the one child", got)
	}
	c.f.Close()
	gone(t, h, "the child after the hang-up")
	if got := a.exit(); got != 0 {
		t.Errorf("agent exited %d, want 0", got)
	}
}

// TestWindowsClientKilled: a client that started after the agent, proven at its connect, is
// killed; the agent stops its children and exits 0.
func TestWindowsClientKilled(t *testing.T) {
	a := startAgent(t)
	exe, _ := os.Executable()
	cl := testproc.Start(t, testproc.Helper(t, "client", a.name, exe))
	child := cl.Expect("child ", time.Minute)
	desc := cl.Expect("descendant ", time.Minute)
	pid, _ := strconv.Atoi(child[0])
	dpid, _ := strconv.Atoi(desc[0])
	h, dh := openPID(t, pid), openPID(t, dpid)
	if err := cl.Process.Kill(); err != nil { // TerminateProcess
		t.Fatal(err)
	}
	gone(t, h, "the killed client's child")
	gone(t, dh, "the killed client's child's descendant")
	if got := a.exit(); got != 0 {
		t.Errorf("agent exited %d after its client's death, want 0", got)
	}
}

// TestWindowsAgentKilled: the agent's own death closes its jobs, and KILL_ON_JOB_CLOSE ends the
// children.
func TestWindowsAgentKilled(t *testing.T) {
	a := startAgent(t)
	c := a.connect()
	rep := c.start("tree", []string{"null", "pipe", "null"}, nil)
	h := openPID(t, num(rep, "pid"))
	dh := descendant(t, rep)
	if err := a.p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	gone(t, h, "the killed agent's child")
	gone(t, dh, "the killed agent's child's descendant")
}

// TestWindowsUsage: --fd is refused on Windows, a --socket that is not a named pipe too, each
// with a one-line error and exit 1, before anything starts.
func TestWindowsUsage(t *testing.T) {
	for _, args := range [][]string{{"--fd", "5"}, {"--socket", `C:\not\a\pipe`}} {
		cmd := testproc.Helper(t, "custody", append([]string{"--ledger", ledgerPath(t), "agent"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := errors.AsType[*exec.ExitError](err)
		if !ok || ee.ExitCode() != 1 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("agent %v: %v, stderr %q; want exit 1 and one line", args, err, stderr.String())
		}
	}
}
