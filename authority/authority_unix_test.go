//go:build unix

package authority_test

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
)

// signalledBy reports whether the helper died of sig.
func (c *child) signalledBy(sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(c.err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func TestSignalTermThroughHandle(t *testing.T) { signalTerm(t) }

func signalTerm(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	p, err := authority.Acquire(exactRecord(c.incarnation()))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer p.Close()
	if err := p.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("Signal(0): %v", err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	if err := p.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.waitExit()
	if !c.signalledBy(syscall.SIGTERM) {
		t.Errorf("helper ended with %v, want killed by SIGTERM", c.err)
	}
}

func TestSignalTypes(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	p, err := authority.Acquire(exactRecord(c.incarnation()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mustIs(t, p.Signal(fakeSignal{}), errors.ErrUnsupported)
	c.assertAlive()
	c.stop()
}

type fakeSignal struct{}

func (fakeSignal) String() string { return "fake" }
func (fakeSignal) Signal()        {}

var _ os.Signal = fakeSignal{}
