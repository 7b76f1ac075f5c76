//go:build linux || darwin

package supervise_test

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() { testproc.Register("socket-child", helperSocketChild) }

// helperSocketChild registers its own group over the v2 socket: it connects, sends the line
// -mode makes, says "sent", and reports the supervisor's answer ("reply ok", or "reply closed" when the
// connection ended without one), then "ready <pid> <start>", and blocks on its lifeline (stdin).
//
//	honest      register <token> <pid> <pgid> <start>, all true
//	lie-pid=N   claim to be N (a leader this process is not)
//	bad-start   a start one tick off
//	malformed   "register <token> <pid>"
func helperSocketChild(args []string) int {
	fs := flag.NewFlagSet("socket-child", flag.ContinueOnError)
	sock := fs.String("socket", "", "the supervisor's socket")
	token := fs.String("token", "", "the reserved token")
	mode := fs.String("mode", "honest", "what to send")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	self, err := procid.Self()
	if err != nil {
		fmt.Fprintln(os.Stderr, "self:", err)
		return 1
	}
	pid, start := self.PID, self.Start
	line := ""
	switch {
	case *mode == "honest":
	case strings.HasPrefix(*mode, "lie-pid="):
		fmt.Sscan(strings.TrimPrefix(*mode, "lie-pid="), &pid)
	case *mode == "bad-start":
		start++
	case *mode == "malformed":
		line = fmt.Sprintf("register %s %d\n", *token, pid)
	}
	if line == "" {
		line = fmt.Sprintf("register %s %d %d %d\n", *token, pid, pid, start)
	}
	c, err := net.Dial("unix", *sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	io.WriteString(c, line)
	fmt.Println("sent")
	c.SetReadDeadline(time.Now().Add(time.Minute))
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		reply = "closed"
	}
	c.Close()
	fmt.Printf("reply %s\nready %d %d\n", strings.TrimSpace(reply), self.PID, self.Start)
	os.Stdout.Close()
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startSocketSupervisor starts the v2 supervisor on a new socket and waits for its "ready".
func startSocketSupervisor(t *testing.T, sock string) *helperProc {
	t.Helper()
	sup := startHelper(t, "supervise-cli", []string{"--owner-pgid", "0", "--grace", "5s", "--socket-path", sock},
		helperOpts{setsid: true, stdout: true})
	if l := sup.line(10 * time.Second); l != "ready" {
		t.Fatalf("supervisor said %q, want ready", l)
	}
	return sup
}

// socketChild starts a socket-child leading its own group, and returns its answer and identity.
func socketChild(t *testing.T, life *os.File, sock, token, mode string) (string, procid.ID) {
	t.Helper()
	h := startHelper(t, "socket-child", []string{"-socket", sock, "-token", token, "-mode", mode},
		helperOpts{setpgid: true, stdin: life, stdout: true})
	if l := h.line(30 * time.Second); l != "sent" {
		t.Fatalf("socket child said %q, want sent", l)
	}
	reply := h.line(30 * time.Second)
	return reply, readyIDs(t, []string{h.line(10 * time.Second)})[0]
}

// shortDir returns a directory whose socket paths fit in sun_path (104 bytes on macOS).
func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "sup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestSocketRegistration: a child registers its own group with a reserved token and is covered;
// a token is good for one registration; a wrong, cancelled or reused token, a lie about the pid,
// a wrong start and a malformed line are closed without an answer and cover nothing; and the
// supervisor keeps serving after each. At end of input only the honest groups die.
func TestSocketRegistration(t *testing.T) {
	life := newLifeline(t)
	sock := filepath.Join(shortDir(t), "s")
	sup := startSocketSupervisor(t, sock)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("socket %s: %v, %v; want no access for group or others", sock, fi, err)
	}
	io.WriteString(sup.stdin, "reserve a\nreserve b\nreserve c\ncancel c\nreserve d\nreserve e\nreserve f\n")
	covered := map[string]procid.ID{}
	spared := map[string]procid.ID{}
	check := func(desc, token, mode, want string) {
		t.Helper()
		reply, id := socketChild(t, life, sock, token, mode)
		if reply != "reply "+want {
			t.Errorf("%s: %q, want reply %s", desc, reply, want)
		}
		if want == "ok" {
			covered[desc] = id
		} else {
			spared[desc] = id
		}
	}
	check("honest", "a", "honest", "ok")
	check("token used twice", "a", "honest", "closed")
	check("cancelled token", "c", "honest", "closed")
	check("a lie about the pid", "d", fmt.Sprintf("lie-pid=%d", covered["honest"].PID), "closed")
	check("token of the lie, used again", "d", "honest", "closed")
	check("a wrong start", "e", "bad-start", "closed")
	check("malformed", "f", "malformed", "closed")
	check("still serving", "b", "honest", "ok")

	feed(t, sup, "")
	exitsCleanly(t, sup, 30*time.Second)
	for desc, id := range covered {
		if alive(id) {
			t.Errorf("%s: group of %v survived the owner's death", desc, id)
		}
	}
	for desc, id := range spared {
		if !alive(id) {
			t.Errorf("%s: %v was killed, but it registered nothing", desc, id)
		}
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Errorf("socket %s left behind", sock)
	}
}

// TestSocketSilentConnection: a connection that sends nothing is closed after the timeout, and
// while it is open the supervisor still handles its owner's end of input: it sweeps and exits
// with the connection still open.
func TestSocketSilentConnection(t *testing.T) {
	life := newLifeline(t)
	sock := filepath.Join(shortDir(t), "s")
	sup := startSocketSupervisor(t, sock)
	io.WriteString(sup.stdin, "reserve a\n")
	_, id := socketChild(t, life, sock, "a", "honest")

	silent, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("silent connection: read %d, %v; want the supervisor to close it", n, err)
	}
	held, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("after a silent connection the supervisor no longer accepts: %v", err)
	}
	defer held.Close()
	feed(t, sup, "")
	exitsCleanly(t, sup, 30*time.Second) // with held still open and silent
	if alive(id) {
		t.Errorf("the covered group survived the owner's death")
	}
}

// TestSocketReserveAfterConnect: the owner's reserve and the child's connection travel on two
// paths; a connection whose token is reserved only after it arrived is still accepted.
func TestSocketReserveAfterConnect(t *testing.T) {
	life := newLifeline(t)
	sock := filepath.Join(shortDir(t), "s")
	sup := startSocketSupervisor(t, sock)
	h := startHelper(t, "socket-child", []string{"-socket", sock, "-token", "late", "-mode", "honest"},
		helperOpts{setpgid: true, stdin: life, stdout: true})
	if l := h.line(30 * time.Second); l != "sent" {
		t.Fatalf("socket child said %q, want sent", l)
	}
	io.WriteString(sup.stdin, "reserve late\n") // after the child's line went out
	if reply := h.line(30 * time.Second); reply != "reply ok" {
		t.Fatalf("%q, want reply ok", reply)
	}
	id := readyIDs(t, []string{h.line(10 * time.Second)})[0]
	feed(t, sup, "")
	exitsCleanly(t, sup, 30*time.Second)
	if alive(id) {
		t.Errorf("the group registered late survived the owner's death")
	}
}
