//go:build unix && !linux

package scope_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// adoptOrphans does nothing: launchd and the BSD inits reap reparented orphans.
func adoptOrphans(*testing.T) {}

// reapOrphan waits until init has reaped pid.
func reapOrphan(t *testing.T, pid int) {
	t.Helper()
	testproc.WaitFor(t, 30*time.Second, func() error {
		if procid.Exists(pid) {
			return fmt.Errorf("orphan %d not reaped yet", pid)
		}
		return nil
	})
}
