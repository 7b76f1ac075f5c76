package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/supervise"
)

type superviseOptions struct {
	*globals
	ownerPGID int
	grace     time.Duration
}

const superviseHelp = `The owner-death supervisor. It reads ASCII lines on its standard input, whose only write end
the owner holds:

  register <pgid>                  cover that process group
  register <pid> <pgid> <start>    cover it, bound to its leader's start (ticks, or "unknown")
  unregister <pgid>                stop covering it

Lines are at most 256 bytes; anything else is ignored. Groups ≤ 1, the supervisor's own and the
owner's (--owner-pgid) are refused. On end of input (the owner died, or released it), every
covered group whose identity still holds gets SIGTERM, then SIGKILL after the grace, and the
supervisor exits 0. SIGINT and SIGHUP are ignored. Any program may start it.

EXIT STATUS
  0   end of input was handled
  1   the supervisor could not run
  2   bad flags or arguments`

func newSupervise(g *globals) *cli.Command {
	o := &superviseOptions{globals: g}
	return &cli.Command{
		Name:         "supervise",
		Usage:        "Run the owner-death supervisor on standard input",
		UsageText:    "custody supervise [--owner-pgid P] [--grace D]",
		Description:  superviseHelp,
		ArgValidator: noArgs,
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "grace", Value: supervise.DefaultGrace, Destination: &o.grace,
				Usage: "time between SIGTERM and SIGKILL"},
			&cli.IntFlag{Name: "owner-pgid", Value: os.Getppid(), DefaultText: "the parent's PID", Destination: &o.ownerPGID,
				Usage: "the owner's process group, never signalled"},
		},
		Action: func(context.Context, *cli.Command) error {
			if o.ownerPGID < 0 || o.grace <= 0 {
				return usagef("supervise: --owner-pgid must be ≥ 0 and --grace positive")
			}
			// Main catches SIGINT and SIGTERM for the other verbs' cleanup. The supervisor has
			// none to do: SIGTERM ends it, as it ends a supervisor started by custody.Init, and
			// supervise.Run ignores SIGINT itself. Caught, SIGTERM would be swallowed.
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			return supervise.Run(supervise.Config{OwnerPGID: o.ownerPGID, Grace: o.grace})
		},
	}
}
