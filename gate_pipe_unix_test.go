//go:build unix

package custody

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The gate's pipe is close-on-exec at both ends from its making (a child another thread forks
// meanwhile must not hold the gate open past the owner's death), and blocking: the gate's read in
// the child waits for the byte, and the owner's write never meets EAGAIN.
func TestGatePipe(t *testing.T) {
	r, w, err := gatePipe()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(r)
	defer unix.Close(w)
	for _, end := range []struct {
		name string
		fd   int
	}{{"read", r}, {"write", w}} {
		fd, err := unix.FcntlInt(uintptr(end.fd), unix.F_GETFD, 0)
		if err != nil {
			t.Fatal(err)
		}
		if fd&unix.FD_CLOEXEC == 0 {
			t.Errorf("the gate's %s end is not close-on-exec", end.name)
		}
		fl, err := unix.FcntlInt(uintptr(end.fd), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		if fl&unix.O_NONBLOCK != 0 {
			t.Errorf("the gate's %s end is non-blocking", end.name)
		}
	}
}
