package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
)

func init() {
	// lazy-reaper becomes a child subreaper, runs the custody command line args as its child,
	// waits for that child alone, and then reaps nothing until its stdin closes: an orphan of the
	// child's (a granted child whose giver exited) stays its unreaped zombie until then.
	testproc.Register("lazy-reaper", func(args []string) int {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Println("error", err)
			return 1
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), testproc.Env("custody"))
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("giver exited")
		var b [1]byte
		os.Stdin.Read(b[:])
		return 0
	})
}

// TestAdoptUnknownStatusSaysSo: an adopted child killed while its parent does not reap it (so
// that no OS tells a non-parent how it ended): adopt exits 5 and says why on stderr, in one line.
func TestAdoptUnknownStatusSaysSo(t *testing.T) {
	led := ledgerPath(t)
	dir := testproc.TempDir(t)
	life := fifoLifeline(t, dir)
	granted := filepath.Join(dir, "grant")
	exe, _ := os.Executable()
	reaper := testproc.Start(t, testproc.Helper(t, "lazy-reaper", "--ledger", led, "run", "--grace", "1s",
		"--grant-env", "HANDOFF", "--", "env", testproc.Env("grantee"), exe, "HANDOFF", granted, life))
	got := awaitFields(t, granted, 2)
	child := incarnationOf(t, got[0])
	receiverCmd := testproc.Helper(t, "custody", "--ledger", led, "adopt", "--grace", "1s", got[1])
	var stderr bytes.Buffer
	receiverCmd.Stderr = &stderr
	receiver := testproc.Start(t, receiverCmd)
	if l := reaper.Line(30 * time.Second); l != "giver exited" {
		t.Fatalf("lazy reaper: %q", l)
	}
	receiver.Process.Signal(syscall.SIGTERM) // forwarded to the child, which dies unreaped
	code := exitCodeOf(receiver.Wait())
	if code != 5 {
		t.Fatalf("adopt of a child killed unreaped: exit %d, want 5 (stderr %q)", code, stderr.String())
	}
	want := fmt.Sprintf("custody: adopt: pid %d exited", child.PID)
	if s := stderr.String(); !strings.HasPrefix(s, want) || strings.Count(s, "\n") != 1 {
		t.Errorf("adopt's stderr on exit 5: %q, want one line starting %q", s, want)
	}
}
