//go:build unix

package agent_test

// The agent is tested as a program: the test binary re-executed as custody (the "custody"
// helper) serves a client this test plays over a socketpair, and the children it starts are the
// test binary again, as helpers.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/cli"
	"github.com/custody-dev/custody/internal/testproc"
)

func TestMain(m *testing.M) {
	custody.Init() // the agent's supervisor is this binary, re-executed
	testproc.Register("custody", func([]string) int { return cli.Main() })
	// hold runs until it is killed.
	testproc.Register("hold", func([]string) int {
		time.Sleep(time.Hour)
		return 0
	})
	// upper copies stdin to stdout in capitals, and says "err" on stderr first.
	testproc.Register("upper", func([]string) int {
		fmt.Fprintln(os.Stderr, "err")
		b, _ := io.ReadAll(os.Stdin)
		os.Stdout.Write([]byte(strings.ToUpper(string(b))))
		return 0
	})
	// tree starts a descendant in a session of its own, which leaves any process group, and
	// prints its PID, then runs until it is killed.
	testproc.Register("tree", func([]string) int {
		exe, _ := os.Executable()
		c := exec.Command(exe)
		c.Env = append(os.Environ(), testproc.Env("hold"))
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("descendant", c.Process.Pid)
		time.Sleep(time.Hour)
		return 0
	})
	// client starts an agent on a socketpair, has it start argv[0] children of the "tree" helper,
	// prints their PIDs and the agent's, then sends the start of a request and waits to be killed
	// in the middle of it.
	// holder keeps a copy of the client's socket (descriptor 3) until its stdin ends, and then
	// until the agent, argv[0], is gone: a process that inherited the connection, which must not
	// keep the agent alive once its client has ended.
	testproc.Register("holder", func(args []string) int {
		io.Copy(io.Discard, os.Stdin)
		agent, _ := strconv.Atoi(args[0])
		testproc.Poll(context.Background(), 5*time.Minute, func() error {
			if syscall.Kill(agent, 0) == nil {
				return errors.New("the agent runs")
			}
			return nil
		})
		return 0
	})
	// orphan starts a descendant that outlives it by two seconds, prints the descendant's PID
	// and exits.
	testproc.Register("orphan", func([]string) int {
		c := exec.Command("/bin/sleep", "2")
		if err := c.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println(c.Process.Pid)
		return 0
	})
	testproc.Register("client", func(args []string) int {
		return runClient(args)
	})
	testproc.Main(m)
}

// client is the test's side of an agent's connection.
type client struct {
	t      testing.TB
	conn   *net.UnixConn
	agent  *exec.Cmd
	ledger string     // the agent's ledger file
	done   chan error // the agent's exit

	mu      sync.Mutex
	waiting map[string]chan msg
	events  chan msg
	nextID  int
	hello   msg
	readErr error
	stderr  *lockedBuffer
}

// msg is one message from the agent and the descriptors that came with it.
type msg struct {
	fields map[string]any
	fds    []*os.File
	raw    string
}

func (m msg) str(k string) string { s, _ := m.fields[k].(string); return s }
func (m msg) num(k string) int    { f, _ := m.fields[k].(float64); return int(f) }
func (m msg) ok() bool            { b, _ := m.fields["ok"].(bool); return b }
func (m msg) code() string {
	e, _ := m.fields["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// socketpair returns the two ends of a socketpair(AF_UNIX, SOCK_STREAM): one as a connection,
// the other as a file for the agent to inherit.
func socketpair(t testing.TB) (*net.UnixConn, *os.File) {
	fds, err := socketpairFDs()
	if err != nil {
		t.Fatal(err)
	}
	mine := os.NewFile(uintptr(fds[0]), "client")
	defer mine.Close()
	c, err := net.FileConn(mine)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "agent")
}

// ledgerPath returns a ledger in a fresh directory.
func ledgerPath(t testing.TB) string {
	return filepath.Join(testproc.TempDir(t), "state", "spawn-ledger.json")
}

// startAgent starts `custody agent --fd 3` and reads its hello.
func startAgent(t testing.TB, args ...string) *client {
	t.Helper()
	conn, theirs := socketpair(t)
	path := ledgerPath(t)
	cmd := testproc.Helper(t, "custody", append([]string{"--ledger", path, "agent", "--fd", "3"}, args...)...)
	cmd.ExtraFiles = []*os.File{theirs}
	c := &client{t: t, conn: conn, agent: cmd, ledger: path, done: make(chan error, 1), waiting: map[string]chan msg{},
		events: make(chan msg, 1024), stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		c.conn.Close()
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-c.done
			t.Errorf("the agent did not end within 30 s of its client's hang-up")
		}
		if s := c.stderr.String(); s != "" {
			t.Logf("agent stderr: %s", s)
		}
	})
	go c.readLoop()
	select {
	case c.hello = <-c.events:
	case <-time.After(time.Minute):
		t.Fatal("no hello within a minute")
	}
	if c.hello.str("event") != "hello" {
		t.Fatalf("first message %s, want a hello", c.hello.raw)
	}
	return c
}

// readLoop reads messages, attributing descriptors as docs/agent.md's "Framing" says (Linux: to
// the line holding the last byte of the read they came with; the BSDs: its first byte), and hands
// replies to their requests, events to c.events.
func (c *client) readLoop() {
	defer close(c.events)
	buf := make([]byte, 1<<16)
	oob := make([]byte, syscall.CmsgSpace(64*4))
	var pending []byte
	var fds []*os.File
	anchor := -1 // the index in pending of the byte fds go with
	for {
		n, oobn, _, _, err := c.conn.ReadMsgUnix(buf, oob)
		if oobn > 0 && n > 0 {
			msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				got, _ := syscall.ParseUnixRights(&m)
				for _, fd := range got {
					fds = append(fds, os.NewFile(uintptr(fd), "passed"))
				}
			}
			anchor = len(pending)
			if runtime.GOOS == "linux" {
				anchor += n - 1
			}
		}
		pending = append(pending, buf[:max(n, 0)]...)
		for {
			i := strings.IndexByte(string(pending), '\n')
			if i < 0 {
				break
			}
			line := string(pending[:i])
			pending = pending[i+1:]
			var m msg
			m.raw = line
			if anchor >= 0 && anchor <= i {
				m.fds, fds, anchor = fds, nil, -1
			} else if anchor > i {
				anchor -= i + 1
			}
			if err := json.Unmarshal([]byte(line), &m.fields); err != nil {
				c.t.Errorf("agent sent a line that is not JSON: %q", line)
				continue
			}
			c.deliver(m)
		}
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			for _, ch := range c.waiting {
				close(ch)
			}
			c.waiting = map[string]chan msg{}
			c.mu.Unlock()
			return
		}
	}
}

func (c *client) deliver(m msg) {
	if _, ok := m.fields["event"]; ok {
		c.events <- m
		return
	}
	id, _ := json.Marshal(m.fields["id"])
	c.mu.Lock()
	ch := c.waiting[string(id)]
	delete(c.waiting, string(id))
	c.mu.Unlock()
	if ch == nil {
		c.t.Errorf("a reply nobody asked for: %s", m.raw)
		return
	}
	ch <- m
}

// send sends req with a fresh id and descriptors, and returns the channel its reply comes on.
func (c *client) send(req map[string]any, fds ...*os.File) chan msg {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	req["id"] = c.nextID
	ch := make(chan msg, 1)
	c.waiting[fmt.Sprint(c.nextID)] = ch
	c.mu.Unlock()
	line, _ := json.Marshal(req)
	c.raw(append(line, '\n'), fds...)
	return ch
}

// raw writes bytes as one sendmsg, with descriptors.
func (c *client) raw(b []byte, fds ...*os.File) {
	c.t.Helper()
	var oob []byte
	if len(fds) > 0 {
		raw := make([]int, len(fds))
		for i, f := range fds {
			raw[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(raw...)
	}
	n, _, err := c.conn.WriteMsgUnix(b, oob, nil)
	if err == nil && n < len(b) {
		_, err = c.conn.Write(b[n:])
	}
	if err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// do sends req and waits for its reply.
func (c *client) do(req map[string]any, fds ...*os.File) msg {
	c.t.Helper()
	return c.await(c.send(req, fds...))
}

func (c *client) await(ch chan msg) msg {
	c.t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			c.t.Fatalf("the connection ended before the reply: %v", c.readErr)
		}
		return m
	case <-time.After(time.Minute):
		c.t.Fatal("no reply within a minute")
	}
	return msg{}
}

// event waits for the next event named name, skipping others.
func (c *client) event(name string) msg {
	c.t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case m, ok := <-c.events:
			if !ok {
				c.t.Fatalf("the connection ended before a %s event", name)
			}
			if m.str("event") == name {
				return m
			}
		case <-deadline:
			c.t.Fatalf("no %s event within a minute", name)
		}
	}
}

// helperArgv is a start's argv and env running the named helper, with the test's mark.
func helperStart(t testing.TB, name, mark string) map[string]any {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	k, v, _ := strings.Cut(testproc.Env(name), "=")
	env[k] = v
	if mark != "" {
		k, v, _ := strings.Cut(mark, "=")
		env[k] = v
	}
	return map[string]any{"op": "start", "argv": []string{exe}, "env": env}
}

// hangup closes the client's end and waits for the agent's exit status.
func (c *client) hangup() error {
	c.t.Helper()
	c.conn.Close()
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(time.Minute):
		c.t.Fatal("the agent did not end within a minute of the hang-up")
	}
	return nil
}

// lines reads r to its end as lines.
func lines(r io.Reader) []string {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// runClient is the "client" helper: argv is the number of children and the ledger.
func runClient(args []string) int {
	n, _ := strconv.Atoi(args[0])
	fds, err := socketpairFDs()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	exe, _ := os.Executable()
	theirs := os.NewFile(uintptr(fds[1]), "agent")
	agent := exec.Command(exe, "--ledger", args[1], "agent", "--fd", "3")
	agent.Env = append(os.Environ(), testproc.Env("custody"))
	agent.ExtraFiles = []*os.File{theirs}
	agent.Stderr = os.Stderr
	if err := agent.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	theirs.Close()
	fmt.Println("agent", agent.Process.Pid)
	mine := os.NewFile(uintptr(fds[0]), "client")
	if len(args) > 2 && args[2] == "leak" {
		holder := exec.Command(exe, strconv.Itoa(agent.Process.Pid))
		holder.Env = append(os.Environ(), testproc.Env("holder"))
		holder.ExtraFiles = []*os.File{mine}
		holder.StdinPipe() // its lifeline: this process's end of it closes when this process dies
		if err := holder.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	c, _ := net.FileConn(mine)
	conn := c.(*net.UnixConn)
	dec := json.NewDecoder(conn)
	var hello map[string]any
	dec.Decode(&hello)
	env := os.Environ()
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	k, v, _ := strings.Cut(testproc.Env("tree"), "=")
	envMap[k] = v
	for i := range n {
		outR, outW, _ := os.Pipe()
		req, _ := json.Marshal(map[string]any{"id": i, "op": "start", "argv": []string{exe}, "env": envMap,
			"stdio": []string{"null", "fd", "inherit"}})
		conn.WriteMsgUnix(append(req, '\n'), syscall.UnixRights(int(outW.Fd())), nil)
		outW.Close()
		var reply map[string]any
		if err := dec.Decode(&reply); err != nil || reply["ok"] != true {
			fmt.Println("error", reply, err)
			return 1
		}
		line, _ := bufioLine(outR)
		desc := strings.TrimPrefix(line, "descendant ")
		fmt.Printf("child %v %s\n", reply["pid"], desc)
		outR.Close()
	}
	conn.Write([]byte(`{"id":"half","op":"st`))
	fmt.Println("mid-request")
	time.Sleep(time.Hour)
	return 0
}

// bufioLine reads one line from f, byte by byte (f is a pipe the reader must not over-read).
func bufioLine(f *os.File) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		if _, err := f.Read(one); err != nil {
			return string(b), err
		}
		if one[0] == '\n' {
			return string(b), nil
		}
		b = append(b, one[0])
	}
}

// socketpairFDs makes a socketpair whose ends are close-on-exec (macOS has no SOCK_CLOEXEC: the
// fork lock keeps a concurrent start from inheriting them in between).
func socketpairFDs() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fds, nil
}
