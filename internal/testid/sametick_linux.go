package testid

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// Case is one case a helper runs inside the PID namespace [RunInPIDNamespace] makes: Run returns
// what it saw, or why it failed.
type Case struct {
	Name string
	Run  func(args []string) (string, error)
}

// RunInPIDNamespace runs the helper registered as name (see [InPIDNamespace]) as PID 1 of a new
// PID namespace, where it may hand out PIDs at will through ns_last_pid, and fails t unless each
// of cases reports ok. It needs root and pidfs ids, the only thing that tells apart the processes
// the same-tick case makes ([NewSameTick]), and skips without them.
func RunInPIDNamespace(t *testing.T, name string, cases []string, args ...string) {
	t.Helper()
	testproc.RequireRoot(t)
	if err := procid.PidfsError(); err != nil {
		testproc.Skip(t, "skipping: pidfs ids unavailable: %v", err)
	}
	cmd := testproc.Helper(t, name, args...)
	testproc.NewPIDNamespace(cmd)
	p := testproc.Start(t, cmd)
	for _, c := range cases {
		f := p.Expect(c+" ", 120*time.Second)
		if len(f) == 0 || f[0] != "ok" {
			t.Fatalf("%s, in the PID namespace: %s", c, strings.Join(f, " "))
		}
		t.Logf("%s: %s", c, strings.Join(f[1:], " "))
	}
}

// InPIDNamespace returns the helper [RunInPIDNamespace] runs: it mounts the namespace's proc,
// then runs each case and prints "<name> ok <what>" or "<name> <why>".
func InPIDNamespace(cases ...Case) func(args []string) int {
	return func(args []string) int {
		err := testproc.MountProc()
		for _, c := range cases {
			what := ""
			if err == nil {
				what, err = c.Run(args)
			}
			if err != nil {
				fmt.Printf("%s %v\n", c.Name, err)
				err = nil
				continue
			}
			fmt.Printf("%s ok %s\n", c.Name, what)
		}
		return 0
	}
}

// StartCat starts cat reading stdin, leading a new process group, or, with pgid > 0, joining
// that one.
func StartCat(stdin *os.File, pgid int) (*exec.Cmd, error) {
	c := exec.Command("cat")
	c.Stdin = stdin
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	return c, c.Start()
}

// EndCat kills and reaps c through its handle.
func EndCat(c *exec.Cmd) { c.Process.Kill(); c.Wait() }

// SameTick is the case only pidfs ids tell apart: Stranger took the PID of Victim, which is dead,
// within the clock tick Victim started in, and leads a group with its id. Both have the same PID,
// boot id, start ticks and process group; their pidfs ids differ.
type SameTick struct {
	Victim, Stranger procid.Incarnation
	Cmd              *exec.Cmd // the stranger, a cat reading the caller's stdin (its lifeline)
	Tries            int
}

// End kills and reaps the stranger.
func (s SameTick) End() { EndCat(s.Cmd) }

// NewSameTick makes the same-tick case, in tries tries at most, as root in a PID namespace of
// its own (see [RunInPIDNamespace]). Each try starts a victim (cat, leading its group) and, with
// hold set, calls it with the victim's incarnation while the victim lives: hold may take what a
// test needs of it (a pinned scope, a registration) and returns what to end along with it. Then
// the victim is killed and reaped, and a stranger takes its PID at once; a try whose stranger
// started in another tick starts over, and hold is called again for the new victim.
func NewSameTick(tries int, hold func(victim procid.Incarnation) (end func(), err error)) (SameTick, error) {
	var s SameTick
	victim := func() (int, uint64, func(), error) {
		r, w, err := os.Pipe() // the victim blocks reading it until killed
		if err != nil {
			return 0, 0, nil, err
		}
		defer r.Close()
		a, err := StartCat(r, 0)
		if err != nil {
			w.Close()
			return 0, 0, nil, err
		}
		end := func() { EndCat(a); w.Close() }
		s.Victim, err = procid.ReadExact(a.Process.Pid)
		if err == nil && hold != nil {
			var endHold func()
			if endHold, err = hold(s.Victim); endHold != nil {
				endA := end
				end = func() { endA(); endHold() }
			}
		}
		if err != nil {
			end()
			return 0, 0, nil, err
		}
		return a.Process.Pid, s.Victim.Start, end, nil
	}
	stranger := func() (*exec.Cmd, int, error) {
		c, err := StartCat(os.Stdin, 0)
		if err != nil {
			return nil, 0, err
		}
		return c, c.Process.Pid, nil
	}
	tick := func(pid int) (uint64, error) {
		inc, err := procid.Read(pid)
		return inc.Start, err
	}
	b, n, err := testproc.ReuseWithinTick(tries, victim, stranger, EndCat, tick)
	if err != nil {
		return s, err
	}
	s.Cmd, s.Tries = b, n
	if s.Stranger, err = procid.ReadExact(b.Process.Pid); err != nil {
		s.End()
		return s, fmt.Errorf("read the stranger: %w", err)
	}
	a, c := s.Victim, s.Stranger
	switch {
	case c.PID != a.PID || c.Start != a.Start || c.BootID != a.BootID || c.PGID != a.PID:
		err = fmt.Errorf("the stranger %v (group %d, boot %s) does not share the victim's pid, group, boot and tick %v", c.ID, c.PGID, c.BootID, a.ID)
	case a.PidfdID == 0 || c.PidfdID == a.PidfdID:
		err = fmt.Errorf("pidfs ids: victim %d, stranger %d", a.PidfdID, c.PidfdID)
	}
	if err != nil {
		s.End()
	}
	return s, err
}

// Lives reports, as an error, that the stranger no longer runs as itself.
func (s SameTick) Lives() error {
	if inc, err := procid.ReadExact(s.Stranger.PID); err != nil || inc.PidfdID != s.Stranger.PidfdID {
		return fmt.Errorf("the stranger did not survive: %v", err)
	}
	return nil
}

// String says which PID and tick the case shares and which pidfs ids tell it apart.
func (s SameTick) String() string {
	return fmt.Sprintf("pid %d tick %d after %d tries: pidfs ids %d (victim) and %d (stranger)",
		s.Victim.PID, s.Victim.Start, s.Tries, s.Victim.PidfdID, s.Stranger.PidfdID)
}
