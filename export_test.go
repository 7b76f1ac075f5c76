package custody

import (
	"context"
	"math"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// FailStartAt makes every start of the test fail at the named step after its child started
// ("attach", "handle", "cover", "record"), until the test ends.
func FailStartAt(t testing.TB, step string, err error) {
	startFault = func(s string) error {
		if s == step {
			return err
		}
		return nil
	}
	t.Cleanup(func() { startFault = nil })
}

// SetAdoptHook sets the function a redemption calls at each of its steps (see adoptHook).
func SetAdoptHook(fn func(step string)) { adoptHook = fn }

// GrantToken, ParseGrant and NewSecret let tests forge and tamper with grant strings.
type GrantToken = grantToken

func ParseGrant(s string) (GrantToken, error) { return parseGrant(s) }

func NewSecret() string { return newSecret() }

// Ungated runs f with the process-group path's children started ungated, to measure the gate.
func Ungated(f func()) {
	noGate = true
	defer func() { noGate = false }()
	f()
}

// StartAsGate makes cmd start as a gate, as an owner's gated start does (false: this binary cannot
// be one), and returns what closes the gate unopened once cmd has started: the gate then exits 125
// without running the program. A benchmark's floor of the gated start.
func StartAsGate(cmd *exec.Cmd) (closeGate func(), ok bool, err error) {
	g, err := newGate(cmd)
	if err != nil || g == nil {
		return nil, false, err
	}
	return func() { g.started(); g.close() }, true, nil
}

// ChildProcess returns the started child's os.Process, which the API keeps to itself.
func ChildProcess(c *Child) *os.Process { return c.cmd.Process }

// FailCloseStops makes Close's stops report timed-out without signalling, until the test ends.
func FailCloseStops(t testing.TB) {
	stopForClose = func(c *Child, _ context.Context, _ StopOptions) StopResult {
		return StopResult{PID: c.ID.PID, Outcome: TimedOut, Reason: "made to fail by the test"}
	}
	t.Cleanup(func() { stopForClose = (*Child).Stop })
}

// AwaitReserved waits until o is not making its reserved cgroup, so that a benchmark times what follows
// on a machine the reservation's making does not share.
func AwaitReserved(o *Owner) {
	for {
		o.mu.Lock()
		r := o.reserving
		o.mu.Unlock()
		if !r {
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// Reserved returns the cgroup (below the mount) of o's reservation, or "" when it has none.
func Reserved(o *Owner) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reserved == nil {
		return ""
	}
	return o.reserved.Cgroup()
}

// WithoutReserved keeps o from making a reserved cgroup, for tests that count what each child leaves
// behind in its supervisor: a reservation, covered or not at the moment of a count, is no child's.
func WithoutReserved(o *Owner) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cgroupStarts = math.MinInt
}

// FindReceipt is the giver's check that the ledger l names receiver as the owner of the child id
// (see Child.handOff); Receipt is the receiver's write of that receipt, as the owner self.
func FindReceipt(ctx context.Context, l *ledger.Ledger, id procid.ID, receiver int) error {
	c := &Child{ID: id, owner: &Owner{Ledger: l}}
	return c.findReceipt(ctx, receiver)
}

func Receipt(ctx context.Context, l *ledger.Ledger, id procid.ID, self procid.Incarnation) error {
	_, err := (&Owner{Ledger: l, self: self}).receipt(ctx, id)
	return err
}
