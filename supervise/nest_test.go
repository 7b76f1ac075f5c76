//go:build linux

package supervise_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
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
	path := filepath.Join(t.TempDir(), "s")
	ln, err := supervise.ListenNest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	served := make(chan error, 1)
	go func() {
		served <- supervise.ServeNest(context.Background(), r, ln, supervise.Config{Grace: time.Second, Logger: supervise.DiscardLogger})
		r.Close()
	}()

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
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sweep did not end")
	}
	testproc.WaitFor(t, 10*time.Second, func() error { return allGone(pid, kid) })
	if !alive(sid) {
		t.Fatal("the stranger's group was signalled")
	}
}
