package supervise_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/supervise"
)

// A supervisor started through Init says in ps what it is and whose: `<binary> supervise
// --owner-pid <the owner> …`, not the bare path of the owner's own binary.
func TestSupervisorArgv(t *testing.T) {
	c := &supervise.Client{Grace: time.Second}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// On the cgroup path Start returns without waiting for the supervisor's readiness, and the
	// kernel fills in a new program's arguments after it closes the descriptors that told the
	// owner the exec took place: the command line reads empty for a moment.
	want := []string{"supervise", "--owner-pid", fmt.Sprint(os.Getpid())}
	testproc.WaitFor(t, 30*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.PID()))
		if err != nil {
			return err
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) < 4 || strings.Join(args[1:4], " ") != strings.Join(want, " ") {
			return fmt.Errorf("the supervisor's argv %q, want it to go on %q", args, want)
		}
		return nil
	})
}
