package caller_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/caller"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() {
	// watch-parent [poll]: take the parent, say "held <pid>", and "done" once it has ended.
	testproc.Register("watch-parent", func(args []string) int {
		if len(args) > 0 && args[0] == "poll" {
			caller.UsePolling()
		}
		return watch(caller.Parent())
	})
	// watch-pid PID [poll]: the same for any process.
	testproc.Register("watch-pid", func(args []string) int {
		if len(args) > 1 && args[1] == "poll" {
			caller.UsePolling()
		}
		pid, _ := strconv.Atoi(args[0])
		return watch(caller.Open(pid))
	})
	// middle: start the helper args[0] as a child, its lines passed on, and stay until killed.
	testproc.Register("middle", func(args []string) int {
		c := exec.Command(os.Args[0], args...)
		c.Env = append(os.Environ(), testproc.Env(args[0]))
		c.Args = append([]string{os.Args[0]}, args[1:]...)
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		// Said before the start: the child's first line ("held") shares this output and, said
		// after, could come first, and the test would wait for one it had passed.
		fmt.Println("middle", os.Getpid())
		if err := c.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		io.Copy(io.Discard, os.Stdin) // until its lifeline ends, or the test kills it
		return 0
	})
	// dying-parent: take the parent, which dies (SIGKILL through a pidfd) while the handle is held
	// and before the proof; say what Parent returned.
	testproc.Register("dying-parent", func([]string) int {
		ppid := unix.Getppid()
		caller.SetHeldHook(func() {
			fd, err := unix.PidfdOpen(ppid, 0)
			if err == nil {
				unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				unix.Close(fd)
			}
			for deadline := time.Now().Add(10 * time.Second); unix.Getppid() == ppid && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond) // polls getppid; synchronises with no process
			}
		})
		p, err := caller.Parent()
		switch {
		case err == nil:
			fmt.Println("result held", p.PID())
		case errors.Is(err, procid.ErrGone):
			fmt.Println("result gone", err)
		default:
			fmt.Println("result error", err)
		}
		return 0
	})
}

func watch(p *caller.Process, err error) int {
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("held", p.PID())
	<-p.Done()
	fmt.Println("done")
	return 0
}

// startMiddle starts a middle process whose child runs helper with args, and returns it with the
// child's "held" PID.
func startMiddle(t *testing.T, helper string, args ...string) (*testproc.Proc, int) {
	t.Helper()
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	// The middle process starts helper: it is this test's use of it.
	cmd := testproc.Helper(t, "middle", append([]string{testproc.Use(helper)}, args...)...)
	cmd.Env = append(cmd.Env, mark)
	m := testproc.Start(t, cmd)
	pid := atoi(t, m.Expect("middle ", 10*time.Second)[0])
	if held := atoi(t, m.Expect("held ", 10*time.Second)[0]); held != pid {
		t.Fatalf("the child holds pid %d, not its parent %d", held, pid)
	}
	return m, pid
}

// TestParentEnds: the parent's end, by SIGKILL or by SIGTERM, closes Done; with pidfd and polled.
func TestParentEnds(t *testing.T) {
	for _, mode := range []string{"pidfd", "poll"} {
		for _, sig := range []unix.Signal{unix.SIGKILL, unix.SIGTERM} {
			t.Run(mode+"/"+sig.String(), func(t *testing.T) {
				args := []string{}
				if mode == "poll" {
					args = append(args, "poll")
				}
				m, _ := startMiddle(t, "watch-parent", args...)
				m.Process.Signal(sig)
				m.Expect("done", 20*time.Second)
			})
		}
	}
}

// TestParentDiesWhileHeld: a parent that dies after the handle is taken and before the proof is
// caught by the getppid re-check: Parent returns an error wrapping ErrGone.
func TestParentDiesWhileHeld(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	cmd := testproc.Helper(t, "middle", testproc.Use("dying-parent"))
	cmd.Env = append(cmd.Env, mark)
	m := testproc.Start(t, cmd)
	if f := m.Expect("result ", 20*time.Second); f[0] != "gone" {
		t.Fatalf("Parent with the parent killed while held: %v; want gone", f)
	}
}

// TestOpen: a process that started before the watcher is held, and its end closes Done.
func TestOpen(t *testing.T) {
	for _, mode := range []string{"pidfd", "poll"} {
		t.Run(mode, func(t *testing.T) {
			target := testproc.Start(t, exec.Command("cat"))
			w := testproc.Start(t, testproc.Helper(t, "watch-pid", strconv.Itoa(target.Process.Pid), mode))
			if held := atoi(t, w.Expect("held ", 10*time.Second)[0]); held != target.Process.Pid {
				t.Fatalf("held %d, want %d", held, target.Process.Pid)
			}
			target.Process.Kill()
			target.Wait()
			w.Expect("done", 20*time.Second)
		})
	}
}

// TestOpenRefused: a dead PID is gone; a PID held by a process that started after the caller (as a
// recycled PID is) is refused as reused; a PID that is no process's is gone.
func TestOpenRefused(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if p, err := caller.Open(dead.Process.Pid); !errors.Is(err, procid.ErrGone) {
		t.Errorf("Open of a reaped child: %v, %v; want ErrGone", p, err)
	}
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	var later *testproc.Proc
	testproc.WaitFor(t, 10*time.Second, func() error { // a start in this process's tick is not later
		later = testproc.Start(t, exec.Command("cat"))
		inc, err := procid.Read(later.Process.Pid)
		if err != nil || inc.Start <= self.Start {
			later.Process.Kill()
			later.Wait()
			return fmt.Errorf("started in tick %d, this process in %d (%v)", inc.Start, self.Start, err)
		}
		return nil
	})
	if p, err := caller.Open(later.Process.Pid); !errors.Is(err, procid.ErrReused) {
		t.Errorf("Open of a process started after the caller: %v, %v; want ErrReused", p, err)
	}
	for _, pid := range []int{0, -1} {
		if _, err := caller.Open(pid); !errors.Is(err, procid.ErrGone) {
			t.Errorf("Open(%d): %v; want ErrGone", pid, err)
		}
	}
}

// TestClose: Close ends the watch without closing Done, and may be called twice.
func TestClose(t *testing.T) {
	p, err := caller.Parent() // go test's process, which outlives the test
	if err != nil {
		t.Fatal(err)
	}
	if p.PID() != os.Getppid() || p.ID().Start == 0 {
		t.Errorf("Parent: %v; want pid %d with its start", p.ID(), os.Getppid())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case <-p.Done():
		t.Errorf("Done closed by Close")
	default:
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
