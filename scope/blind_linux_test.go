package scope_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

func init() { testproc.Register("empty-blind", helperEmptyBlind) }

// TestGroupEmptyBlind: under a /proc mounted with hidepid=2, an ordinary user cannot scan for the
// live members of its own group: Empty says it cannot tell, and why, and a Wait that times out
// gives that reason, instead of a bare "not empty" and a stop timed out without one.
func TestGroupEmptyBlind(t *testing.T) {
	testproc.RequireRoot(t)
	cmd := testproc.Helper(t, "empty-blind")
	cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS // a private proc mount
	h := testproc.Start(t, cmd)
	for _, what := range []string{"empty", "wait"} {
		f := h.Expect(what+" ", 30*time.Second)
		if len(f) < 1 || f[0] != "blind" {
			t.Errorf("%s under hidepid=2 as nobody: %v; want an error wrapping procid.ErrScanBlind", what, f)
		}
	}
}

// helperEmptyBlind mounts a proc with hidepid=2, becomes nobody, starts a process in a group of
// its own, and prints "empty <blind|other> <err>" and "wait <blind|other> <err>" for that group.
func helperEmptyBlind([]string) int {
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "hidepid=2"); err != nil {
		fmt.Println("skip cannot mount proc with hidepid=2:", err)
		return 0
	}
	if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(65534), syscall.Setuid(65534)); err != nil {
		fmt.Println("skip cannot become nobody:", err)
		return 0
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	// No start recorded: nothing pins the leader, and the group is checked by number.
	g, err := scope.FromGroup(cmd.Process.Pid, procid.ID{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	report := func(what string, err error) {
		kind := "other"
		if errors.Is(err, procid.ErrScanBlind) {
			kind = "blind"
		}
		fmt.Println(what, kind, err)
	}
	_, err = g.Empty()
	report("empty", err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	report("wait", g.Wait(ctx))
	return 0
}
