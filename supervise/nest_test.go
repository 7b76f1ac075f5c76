//go:build linux

package supervise_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.Register("nest-peer", helperNestPeer) }

// helperNestPeer is a nested owner speaking the nest socket by hand: it prints "ready <pid>
// <start>", waits for a line on stdin (its group is covered by then), starts a child in a group
// of its own, and sends, printing "<case> <answer>" for each:
//
//	stranger         register of the group args[1..2] names (pgid, start): not its child
//	kid              register of its child's group
//	other-unregister unregister of its child's group, on a second connection
//	kid-wrong-start  register of its child's group with another start
//
// then "kid <pid> <start>" and "done", and blocks on stdin, its lifeline.
func helperNestPeer(args []string) int {
	if err := nestPeer(args); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

func nestPeer(args []string) error {
	me, err := procid.Self()
	if err != nil {
		return err
	}
	fmt.Printf("ready %d %d\n", me.PID, me.Start)
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	kid := exec.Command("sleep", "60")
	kid.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := kid.Start(); err != nil {
		return err
	}
	go kid.Wait()
	k, err := procid.Read(kid.Process.Pid)
	if err != nil {
		return err
	}
	ask := func(c net.Conn, name, line string) error {
		if _, err := fmt.Fprintln(c, line); err != nil {
			return err
		}
		answer, err := bufio.NewReader(c).ReadString('\n')
		fmt.Println(name, strings.TrimSpace(answer))
		return err
	}
	c1, err := net.Dial("unix", args[0])
	if err != nil {
		return err
	}
	c2, err := net.Dial("unix", args[0])
	if err != nil {
		return err
	}
	for _, q := range []struct {
		c          net.Conn
		name, line string
	}{
		{c1, "stranger", fmt.Sprintf("register %s %s %s", args[1], args[1], args[2])},
		{c1, "kid", fmt.Sprintf("register %d %d %d", k.PID, k.PID, k.Start)},
		{c2, "other-unregister", fmt.Sprintf("unregister %d", k.PID)},
		{c2, "kid-wrong-start", fmt.Sprintf("register %d %d %d", k.PID, k.PID, k.Start+1)},
	} {
		if err := ask(q.c, q.name, q.line); err != nil {
			return err
		}
	}
	fmt.Printf("kid %d %d\ndone\n", k.PID, k.Start)
	in.ReadString('\n')
	return nil
}

// A process in a covered group registers its own child's group on the nest socket, and the
// owner's death stops it; a group that is not its child, a wrong start, and an unregister from
// another connection are refused, and the stranger's group is never signalled.
func TestNestAdmission(t *testing.T) {
	path, w, served := serveNest(t, time.Second)
	stranger := startHelper(t, "child", nil, helperOpts{setpgid: true, stdout: true})
	sid := readyIDs(t, []string{stranger.line(20 * time.Second)})[0]
	peer := startHelper(t, "nest-peer", []string{path, strconv.Itoa(sid.PID), strconv.FormatUint(sid.Start, 10)},
		helperOpts{setpgid: true, stdout: true})
	pid := readyIDs(t, []string{peer.line(20 * time.Second)})[0]
	fmt.Fprintf(w, "register %d %d %d\n", pid.PID, pid.PID, pid.Start) // the owner covers the peer's group
	fmt.Fprintln(peer.stdin, "go")

	want := map[string]string{"stranger": "refused", "kid": "ok", "other-unregister": "refused", "kid-wrong-start": "refused"}
	var kid procid.ID
	for l := peer.line(20 * time.Second); l != "done"; l = peer.line(20 * time.Second) {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "kid":
			n, _ := strconv.Atoi(f[1])
			s, _ := strconv.ParseUint(f[2], 10, 64)
			kid = procid.ID{PID: n, Start: s}
		case len(f) == 2 && want[f[0]] != "":
			if f[1] != want[f[0]] {
				t.Errorf("%s: answered %q, want %q", f[0], f[1], want[f[0]])
			}
			delete(want, f[0])
		default:
			t.Fatalf("nest-peer: %q", l)
		}
	}
	if len(want) > 0 {
		t.Fatalf("no answers for %v", want)
	}
	w.Close() // the owner's death
	awaitServed(t, served)
	testproc.WaitFor(t, 10*time.Second, func() error { return allGone(pid, kid) })
	if !alive(sid) {
		t.Fatal("the stranger's group was signalled")
	}
}

func init() { testproc.Register("nest-late", helperNestLate) }

// helperNestLate is a nested owner that outlives a SIGTERM, as `custody run` does to stop its
// child: it catches SIGTERM (its children, unlike with an ignored one, do not inherit it) and
// prints "term" when one comes. It prints "ready <pid> <start>", and at the first line on stdin
// starts a child in a group of its own and registers it on the nest socket args[0], printing "kid
// <answer>". At the second line it asks again on the same connection, printing "<case> <answer>":
//
//	release   unregister of its child's group
//	late      register of a second child's group
//
// then "done", and exits at the next line on stdin, its lifeline, killing its second child.
func helperNestLate(args []string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		fmt.Println("term")
	}()
	if err := nestLate(args[0]); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

func nestLate(path string) error {
	me, err := procid.Self()
	if err != nil {
		return err
	}
	fmt.Printf("ready %d %d\n", me.PID, me.Start)
	in := bufio.NewReader(os.Stdin)
	c, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	answers := bufio.NewReader(c)
	ask := func(name, line string) error {
		if _, err := fmt.Fprintln(c, line); err != nil {
			return err
		}
		answer, err := answers.ReadString('\n')
		fmt.Println(name, strings.TrimSpace(answer))
		return err
	}
	kid := func() (procid.Incarnation, error) {
		k := exec.Command("sleep", "60")
		k.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := k.Start(); err != nil {
			return procid.Incarnation{}, err
		}
		go k.Wait()
		return procid.Read(k.Process.Pid)
	}
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	k, err := kid()
	if err != nil {
		return err
	}
	if err := ask("kid", fmt.Sprintf("register %d %d %d", k.PID, k.PID, k.Start)); err != nil {
		return err
	}
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	if err := ask("release", fmt.Sprintf("unregister %d", k.PID)); err != nil {
		return err
	}
	k2, err := kid()
	if err != nil {
		return err
	}
	defer syscall.Kill(k2.PID, syscall.SIGKILL) // its own child, never covered
	if err := ask("late", fmt.Sprintf("register %d %d %d", k2.PID, k2.PID, k2.Start)); err != nil {
		return err
	}
	fmt.Println("done")
	in.ReadString('\n')
	return nil
}

// While the sweep that follows its owner's death runs, the supervisor answers its nested owners
// at once: the release of a group they registered is ok, a new registration is refused. Before,
// their lines went unread until the sweep ended, and a nested owner stopping its child on the
// sweep's SIGTERM waited for an answer until the sweep SIGKILLed it at the grace.
func TestNestAnsweredDuringSweep(t *testing.T) {
	// The grace bounds the test only if the fix is missing: the peer then never answers.
	path, w, served := serveNest(t, 20*time.Second)
	peer := startHelper(t, "nest-late", []string{path}, helperOpts{setpgid: true, stdout: true})
	pid := readyIDs(t, []string{peer.line(20 * time.Second)})[0]
	fmt.Fprintf(w, "register %d %d %d\n", pid.PID, pid.PID, pid.Start) // the owner covers the peer's group
	fmt.Fprintln(peer.stdin, "go")
	if l := peer.line(20 * time.Second); l != "kid ok" {
		t.Fatalf("the nested registration before the owner's death: %q", l)
	}
	w.Close() // the owner's death: the sweep SIGTERMs the peer, which lives on, and its child
	// Its SIGTERM comes from the sweep: its next lines are read while the sweep runs.
	if l := peer.line(20 * time.Second); l != "term" {
		t.Fatalf("the peer, before the sweep's SIGTERM: %q", l)
	}
	fmt.Fprintln(peer.stdin, "again")
	want := map[string]string{"release": "ok", "late": "refused"}
	for l := peer.line(10 * time.Second); l != "done"; l = peer.line(10 * time.Second) {
		f := strings.Fields(l)
		if len(f) != 2 || want[f[0]] == "" {
			t.Fatalf("nest-late: %q", l)
		}
		if f[1] != want[f[0]] {
			t.Errorf("%s during the sweep: answered %q, want %q", f[0], f[1], want[f[0]])
		}
		delete(want, f[0])
	}
	select {
	case <-served:
		t.Fatal("the sweep ended while the peer, which outlives SIGTERM, still ran")
	default:
	}
	fmt.Fprintln(peer.stdin, "end") // its exit ends the sweep: nothing it covers is left
	awaitServed(t, served)
}

// serveNest runs a supervisor in this process, as Run does with a nest socket, with the given
// grace: it returns the socket's path, the owner's end of its input (its Close is the owner's
// death) and where the supervisor's end is told.
func serveNest(t *testing.T, grace time.Duration) (path string, owner *os.File, served <-chan error) {
	path = filepath.Join(t.TempDir(), "s")
	ln, err := supervise.ListenNest(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	done := make(chan error, 1)
	go func() {
		done <- supervise.ServeNest(context.Background(), r, ln, supervise.Config{Grace: grace, Logger: supervise.DiscardLogger})
		r.Close()
	}()
	return path, w, done
}

// awaitServed waits for the end of a supervisor started by serveNest.
func awaitServed(t *testing.T, served <-chan error) {
	t.Helper()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sweep did not end")
	}
}
