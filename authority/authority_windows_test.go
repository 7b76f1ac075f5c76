package authority_test

import (
	"errors"
	"os"
	"testing"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
)

func TestWindowsSignalsOnlyKill(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	p, err := authority.Acquire(exactRecord(c.incarnation()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !p.Pinned() {
		t.Error("Pinned() = false for a process handle")
	}
	mustIs(t, p.Signal(os.Interrupt), errors.ErrUnsupported)
	c.assertAlive()
	c.stop()
	// An exited process is gone for every signal, so a stop, whose first signal is SIGTERM, says
	// already-exited rather than going on to a kill.
	err = p.Signal(os.Interrupt)
	mustIs(t, err, procid.ErrGone)
	mustNotIs(t, err, errors.ErrUnsupported)
}
