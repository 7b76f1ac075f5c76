package scope_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

func init() {
	testproc.Register("pidns-group-reuse", testid.InPIDNamespace(
		testid.Case{Name: "later-tick", Run: groupCase(reuseLaterTick)},
		testid.Case{Name: "same-tick", Run: groupCase(reuseSameTick)},
		testid.Case{Name: "attached", Run: groupCase(reuseAttached)}))
}

// TestGroupPIDReuse: in a PID namespace, a group's leader A and its member exit, and a stranger B
// takes A's PID and leads a group with A's id: once in a later clock tick, once within the tick A
// started in (asserted), where A's row and B have the same start ticks, and once for a scope an
// owner took at A's spawn (Attach), which keeps the pidfd Go took then. A scope that pinned A while
// it lived answers gone and signals nothing, in both cases, with no identity check at all: the
// kernel resolves the group from A's own struct pid. A scope opened from A's record afterwards
// finds B at the PID and refuses (by start, or, within the tick, by pidfs id). B lives throughout.
func TestGroupPIDReuse(t *testing.T) {
	testid.RunInPIDNamespace(t, "pidns-group-reuse", []string{"later-tick", "same-tick", "attached"})
}

// groupReuse is one run of the case: a pinned scope of A's group, and the stranger at A's PID.
type groupReuse struct {
	a      procid.Incarnation
	pinned *scope.Scope
	b      *exec.Cmd
	tries  int
}

// groupCase runs one case of TestGroupPIDReuse and checks it.
func groupCase(run func() (groupReuse, error)) func([]string) (string, error) {
	return func([]string) (string, error) {
		r, err := run()
		if err == nil {
			err = r.check()
		}
		if r.b != nil {
			testid.EndCat(r.b)
		}
		return fmt.Sprintf("pid %d tick %d after %d tries", r.a.PID, r.a.Start, r.tries), err
	}
}

// startCat starts cat leading a new process group, or, with pgid > 0, joining that one. It reads
// this helper's stdin, the test's lifeline.
func startCat(pgid int) (*exec.Cmd, error) { return testid.StartCat(os.Stdin, pgid) }

func endCat(c *exec.Cmd) { testid.EndCat(c) }

// victim starts A and a member of its group, and pins A's group in a scope; end kills and reaps
// both through their handles.
func victim() (r groupReuse, end func(), err error) {
	a, err := startCat(0)
	if err != nil {
		return r, nil, err
	}
	m, err := startCat(a.Process.Pid)
	if err != nil {
		endCat(a)
		return r, nil, err
	}
	end = func() { endCat(a); endCat(m) }
	if r.a, err = procid.ReadExact(a.Process.Pid); err == nil {
		r.pinned, err = scope.FromGroup(r.a.PID, r.a.ID)
	}
	if err == nil && !r.pinned.Pinned() {
		err = errors.New("the scope of a live leader is not pinned")
	}
	if err != nil {
		end()
	}
	return r, end, err
}

func reuseLaterTick() (groupReuse, error) {
	r, end, err := victim()
	if err != nil {
		return r, err
	}
	end()
	r.b, err = testproc.ReusePID(r.a.PID, r.a.Start, func() (*exec.Cmd, error) { return startCat(0) })
	r.tries = 1
	return r, err
}

// reuseAttached is reuseLaterTick for a scope taken by Prepare and Attach, as an owner takes its
// child's: its pidfd is a copy of the one Go took at spawn, and outlives the child's reaping.
func reuseAttached() (r groupReuse, err error) {
	os.Setenv(scope.EnvContainment, "process-group")
	defer os.Unsetenv(scope.EnvContainment)
	a := exec.Command("cat")
	a.Stdin = os.Stdin
	prep, err := scope.Prepare(a)
	if err != nil {
		return r, err
	}
	if err := a.Start(); err != nil {
		prep.Abandon()
		return r, err
	}
	if r.pinned, err = prep.Attach(); err != nil {
		a.Wait()
		return r, err
	}
	m, err := startCat(a.Process.Pid)
	if err != nil {
		endCat(a)
		return r, err
	}
	if r.a, err = procid.ReadExact(a.Process.Pid); err != nil || !r.pinned.Pinned() {
		endCat(a)
		endCat(m)
		return r, fmt.Errorf("attached %v: pinned %v, %v", r.a.ID, r.pinned.Pinned(), err)
	}
	endCat(a) // reaped: Go closes its own pidfd on the child now
	endCat(m)
	r.b, err = testproc.ReusePID(r.a.PID, r.a.Start, func() (*exec.Cmd, error) { return startCat(0) })
	r.tries = 1
	return r, err
}

func reuseSameTick() (groupReuse, error) {
	var r groupReuse
	st, err := testid.NewSameTick(500, func(a procid.Incarnation) (func(), error) {
		if r.pinned != nil {
			r.pinned.Release() // a try whose stranger missed the tick
		}
		m, err := startCat(a.PID)
		if err != nil {
			return nil, err
		}
		r.a = a
		if r.pinned, err = scope.FromGroup(a.PID, a.ID); err == nil && !r.pinned.Pinned() {
			err = errors.New("the scope of a live leader is not pinned")
		}
		return func() { endCat(m) }, err
	})
	r.b, r.tries = st.Cmd, st.Tries
	return r, err
}

// check asserts that neither the pinned scope nor one opened from A's record reaches B.
func (r groupReuse) check() error {
	defer r.pinned.Release()
	b, err := procid.ReadExact(r.b.Process.Pid)
	switch {
	case err != nil:
		return fmt.Errorf("read B: %v", err)
	case b.PID != r.a.PID || b.PGID != r.a.PID || b.PidfdID == r.a.PidfdID:
		return fmt.Errorf("B %v (group %d) does not lead a group with A's id %v", b.ID, b.PGID, r.a.ID)
	}
	if err := r.pinned.Signal(syscall.SIGKILL); !errors.Is(err, procid.ErrGone) {
		return fmt.Errorf("the pinned scope of A's group, with B at A's pid: %v; want gone", err)
	}
	opened, err := scope.FromGroup(r.a.PID, r.a.ID)
	if err != nil {
		return err
	}
	defer opened.Release()
	if err := opened.Signal(syscall.SIGKILL); !errors.Is(err, authority.ErrNoAuthority) || !errors.Is(err, procid.ErrReused) {
		return fmt.Errorf("A's group opened from its record, with B at A's pid: %v; want no authority, reused", err)
	}
	if now, err := procid.ReadExact(b.PID); err != nil || now.PidfdID != b.PidfdID {
		return fmt.Errorf("the stranger did not survive: %v", err)
	}
	return nil
}
