package supervise_test

import (
	"fmt"
	"testing"

	"github.com/custody-dev/custody/supervise"
	"golang.org/x/sys/unix"
)

// TestRegistrationHoldsLeader: on Linux a registration proven against the live leader keeps a
// pidfd on it, in both forms, so that the sweep signals the group through the kernel's own
// reference rather than by a number checked a moment before; a registration refused for a wrong
// start keeps nothing.
func TestRegistrationHoldsLeader(t *testing.T) {
	if fd, err := unix.PidfdOpen(unix.Getpid(), 0); err != nil {
		requireCapability(t, "pidfd_open", err)
	} else {
		unix.Close(fd)
	}
	g := startGroup(t, newLifeline(t))
	for _, c := range []struct {
		line                  string
		wantCovered, wantHeld bool
	}{
		{fmt.Sprintf("register %d %d %d", g.pgid(), g.pgid(), g.leader().Start), true, true},
		{fmt.Sprintf("register %d", g.pgid()), true, true},
		{fmt.Sprintf("register %d %d %d", g.pgid(), g.pgid(), g.leader().Start+1), false, false},
	} {
		covered, held, release := supervise.Registration(c.line)
		release()
		if covered != c.wantCovered || held != c.wantHeld {
			t.Errorf("%q: covered %v, pidfd held %v; want %v, %v", c.line, covered, held, c.wantCovered, c.wantHeld)
		}
	}
}
