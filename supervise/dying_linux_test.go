package supervise

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/procid"
)

// TestDyingStopsBeforeEOF runs the supervisor's loop on a pipe whose write end the test holds:
// the owner's death is told (dyingReader.dead) while the pipe stays open. A group registered by a
// line written before the death must be sent SIGTERM then, without the pipe's end; a group
// registered by a line written after it (a dying thread's last write) must be sent it on
// arrival; and the pipe's end must end the loop.
func TestDyingStopsBeforeEOF(t *testing.T) {
	w, dr := dyingPipe(t, time.Minute)
	first := startSleep(t)
	register(t, w, first)
	dr.dead()
	served := serveDying(dr)
	awaitTERM(t, first)
	second := startSleep(t)
	register(t, w, second)
	awaitTERM(t, second)
	w.Close()
	awaitServed(t, served, "the loop did not end at the pipe's end")
}

// dyingPipe makes the owner's pipe, read through a dyingReader whose wait after the death is
// wait; the test holds the write end (closed when it ends).
func dyingPipe(t *testing.T, wait time.Duration) (*os.File, *dyingReader) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	dr, err := newDyingReader(int(r.Fd()), wait)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	return w, dr
}

// register writes the line that covers the sleeper's group, bound to its start.
func register(t *testing.T, w *os.File, s *sleeper) {
	inc, err := procid.Read(s.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w, "register %d %d %d\n", inc.PID, inc.PID, inc.Start)
}

// serveDying runs the supervisor's loop on dr and returns where its end is told.
func serveDying(dr *dyingReader) <-chan error {
	served := make(chan error, 1)
	go func() { served <- Serve(context.Background(), dr, Config{Grace: time.Minute}) }()
	return served
}

// awaitServed waits for the loop to end without error, failing with stuck if it does not.
func awaitServed(t *testing.T, served <-chan error, stuck string) {
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(stuck)
	}
}

// sleeper is a sleep in a process group of its own; exited is closed once it is reaped.
type sleeper struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startSleep starts a sleeper, killed and reaped at cleanup.
func startSleep(t *testing.T) *sleeper {
	c := exec.Command("sleep", "60")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	s := &sleeper{cmd: c, exited: make(chan struct{})}
	go func() { c.Wait(); close(s.exited) }()
	t.Cleanup(func() { c.Process.Kill(); <-s.exited })
	return s
}

// awaitTERM waits up to 10 s for s to be ended by SIGTERM.
func awaitTERM(t *testing.T, s *sleeper) {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d was not stopped", s.cmd.Process.Pid)
	}
	ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("pid %d ended with %v, not SIGTERM", s.cmd.Process.Pid, s.cmd.ProcessState)
	}
}

// TestDyingEndsWhileThePipeStaysOpen tells the owner's death while a copy of the pipe's write end
// stays open (as a leaked one would): the supervisor's loop must still end once the dying
// reader's wait has passed, after the group registered before the death was sent SIGTERM.
func TestDyingEndsWhileThePipeStaysOpen(t *testing.T) {
	w, dr := dyingPipe(t, 200*time.Millisecond)
	s := startSleep(t)
	register(t, w, s)
	dr.dead()
	served := serveDying(dr)
	awaitTERM(t, s)
	awaitServed(t, served, "the loop did not end while the pipe stayed open")
}

// TestDyingWordAtEOF: when the pipe's end is read before the word's waiter has told the reader
// (dead is never called here), a word the kernel marked FUTEX_OWNER_DIED makes the end a death:
// errDying first, then the end. An unmarked word leaves it a release: the end alone.
func TestDyingWordAtEOF(t *testing.T) {
	for _, tc := range []struct {
		word uint32
		want []error
	}{
		{futexOwnerDied, []error{errDying, io.EOF}},
		{uint32(os.Getpid()), []error{io.EOF, io.EOF}},
	} {
		w, dr := dyingPipe(t, time.Minute)
		word := tc.word
		dr.word = &word
		w.Close()
		for i, want := range tc.want {
			if _, err := dr.Read(make([]byte, 64)); err != want {
				t.Errorf("word %#x, read %d: %v, want %v", tc.word, i, err, want)
			}
		}
	}
}
