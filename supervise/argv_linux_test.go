package supervise_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.PID()))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	want := []string{"supervise", "--owner-pid", fmt.Sprint(os.Getpid())}
	if len(args) < 4 || strings.Join(args[1:4], " ") != strings.Join(want, " ") {
		t.Errorf("the supervisor's argv %q, want it to go on %q", args, want)
	}
}
