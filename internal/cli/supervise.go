package cli

import (
	"context"
	"math"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/supervise"
)

type superviseOptions struct {
	*globals
	ownerPGID  int
	grace      time.Duration
	socketPath string
}

const superviseHelp = `The owner-death supervisor. It reads ASCII lines on its standard input, whose only write end
the owner holds:

  register <pgid>                  cover that process group
  register <pid> <pgid> <start>    cover it, bound to its leader's start (ticks, or "unknown")
  unregister <pgid>                stop covering it

Lines are at most 256 bytes; anything else is ignored. Groups ≤ 1, the supervisor's own and the
owner's (--owner-pgid) are refused. On end of input (the owner died, or released it), every
covered group whose identity still holds gets SIGTERM, then SIGKILL after the grace, and the
supervisor exits 0. SIGINT and SIGHUP are ignored. Any program may start it, in a session of its
own: started inside the owner's process group it refuses to run (exit 2), since whatever ends
that group would end the supervisor with it.

It is a drop-in for the Hermes supervisor: the owner's group may also be given as
--parent-pgid P or as the one argument P. With --socket-path S (the v2 form) it listens on a
new Unix socket S, prints "ready", and takes two more lines on standard input:

  reserve <token>                  allow one socket registration with token
  cancel <token>                   withdraw it

A child then connects to S and sends one line, "register <token> <pid> <pgid> <start>": accepted
(answered "ok") only when the token is reserved (it is consumed), the child's peer credentials
are pid, pid leads pgid, and start is pid's start in ticks. Any other connection (a malformed
line, a wrong token, 5 s without a line) is closed without an answer; nothing is registered.

EXIT STATUS
  0   end of input was handled
  1   the supervisor could not run
  2   bad flags or arguments, or started inside the owner's process group
  3   the socket could not be set up (--socket-path)`

func newSupervise(g *globals) *cli.Command {
	o := &superviseOptions{globals: g}
	return &cli.Command{
		Name:        "supervise",
		Usage:       "Run the owner-death supervisor on standard input",
		UsageText:   "custody supervise [--owner-pgid P | --parent-pgid P | P] [--grace D] [--socket-path S]",
		Description: superviseHelp,
		Flags: []cli.Flag{
			graceFlag(&o.grace, ""),
			&cli.IntFlag{Name: "owner-pgid", Aliases: []string{"parent-pgid"}, Value: os.Getppid(),
				DefaultText: "the parent's PID", Destination: &o.ownerPGID,
				Usage: "the owner's process group, never signalled"},
			// What a supervisor started by a custody owner shows in ps; nothing else reads it.
			&cli.IntFlag{Name: "owner-pid", Hidden: true, Usage: "the owner's PID, for ps; unused"},
			&cli.StringFlag{Name: "socket-path", Destination: &o.socketPath,
				Usage: "listen for v2 socket registrations there (a new Unix socket)"},
		},
		Action: func(_ context.Context, cmd *cli.Command) error {
			if err := o.positional(cmd); err != nil {
				return err
			}
			if o.ownerPGID < 0 || o.ownerPGID > math.MaxInt32 {
				return usagef("supervise: --owner-pgid must be a process group (0 to %d)", math.MaxInt32)
			}
			if own := processGroup(); own > 0 && own == o.ownerPGID {
				return usagef("supervise: started inside the owner's process group %d: start it in a session of its own (setsid)", own)
			}
			// Main catches SIGINT and SIGTERM for the other verbs' cleanup. The supervisor has
			// none to do: SIGTERM ends it, as it ends a supervisor started by custody.Init, and
			// supervise.Run ignores SIGINT itself. Caught, SIGTERM would be swallowed.
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			return runSupervise(o)
		},
	}
}

// positional takes the Hermes form `supervise P`: one argument, the owner's process group. Given
// together with --owner-pgid it must agree with it.
func (o *superviseOptions) positional(cmd *cli.Command) error {
	switch cmd.NArg() {
	case 0:
		return nil
	case 1:
	default:
		return usagef("supervise: takes at most one argument, the owner's process group; got %d", cmd.NArg())
	}
	p, err := strconv.Atoi(cmd.Args().First())
	if err != nil || p < 0 || p > math.MaxInt32 { // pid_t is 32-bit: a larger number names no group
		return usagef("supervise: owner process group %q is not a process group (0 to %d)", cmd.Args().First(), math.MaxInt32)
	}
	if cmd.IsSet("owner-pgid") && p != o.ownerPGID {
		return usagef("supervise: owner process group given twice: %d and %d", o.ownerPGID, p)
	}
	o.ownerPGID = p
	return nil
}

func runSupervise(o *superviseOptions) error {
	cfg := supervise.Config{OwnerPGID: o.ownerPGID, Grace: o.grace, OwnerCgroup: os.Getenv(supervise.EnvOwnerCgroup)}
	if o.socketPath == "" {
		return supervise.Run(cfg)
	}
	return supervise.RunSocket(cfg, o.socketPath)
}
