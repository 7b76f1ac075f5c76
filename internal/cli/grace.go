package cli

import (
	"errors"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
)

// graceFlag is the --grace flag of every command that stops something: the time between SIGTERM
// and SIGKILL, [stop.DefaultGrace] unless given, and positive (a zero or negative grace would
// read as "use the default" to the library, which is not what was asked). what says what the
// grace is for.
func graceFlag(dest *time.Duration, what string) *cli.DurationFlag {
	return &cli.DurationFlag{Name: "grace", Value: stop.DefaultGrace, Destination: dest,
		Usage: "time between SIGTERM and SIGKILL" + what, Validator: checkGrace}
}

var errGrace = errors.New("must be positive")

func checkGrace(d time.Duration) error {
	if d <= 0 {
		return errGrace
	}
	return nil
}

// newOwner returns the owner custody run and custody adopt act as, whose every stop of the child takes
// grace (--grace): the final stop after the child's exit, [custody.Owner.Close]'s of what that
// stop could not end, and the supervisor's at custody's own death. Without Stop set, Close would
// stop the child again with the default grace instead. caller is the program custody answers to
// (--owner), recorded in the child's row, or nil.
func (g *globals) newOwner(l *ledger.Ledger, tagEnv, verb string, grace time.Duration, caller *procid.ID) *custody.Owner {
	return g.newOwnerWith(l, tagEnv, grace, caller, g.newSupervisor(grace, verb))
}

// newOwnerWith is newOwner with the supervisor given, made by newSupervisor.
func (g *globals) newOwnerWith(l *ledger.Ledger, tagEnv string, grace time.Duration, caller *procid.ID, sup *supervise.Client) *custody.Owner {
	return &custody.Owner{Ledger: l, Install: g.install(), TagEnv: tagEnv, Caller: caller, Stop: stop.Options{Grace: grace},
		Supervisor: sup}
}

// newSupervisor returns the supervisor client of an owner that custody run or custody adopt
// acts as: its stops of what it covers take grace, and a loss of cover is told on stderr as the
// verb's.
func (g *globals) newSupervisor(grace time.Duration, verb string) *supervise.Client {
	return &supervise.Client{Grace: grace, Notify: coverage(g.stderr, verb)}
}
