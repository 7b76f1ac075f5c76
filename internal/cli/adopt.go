package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/stop"
)

type adoptOptions struct {
	*globals
	grace time.Duration
	owner string // --owner: parent, self or a PID (see takeOwner)
	grant string
}

const adoptHelp = `Take custody of a child that another owner granted (custody run --grant-env, or a program
through the Go API), then behave as run does for it. The grant is redeemed over its giver's
socket: custody proves the child through a handle of its own, records itself as the owner in the
ledger (the receipt; custody ps shows it), covers the child's process group with its own
supervisor, and only then does the giver let go. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and
SIGUSR2 are forwarded to the child's group. When the child exits, whatever is left of its group is
stopped (SIGTERM, the grace, SIGKILL) and its row is dropped. If custody itself dies, by any cause,
the supervisor stops the whole group within the grace.

A grant is refused, and nothing changes, when it is malformed, expired, forged, already used,
another user's, for a child that has exited, or when its giver is gone (a giver's death takes the
child with it). The ledger must be the one the grant names: the giver looks for the receipt there.

custody is not the adopted child's parent: it sees the child exit, and exits with its status
(its exit code, or 128+N for signal N) where the OS reports it to a non-parent: Windows, through
custody's handle on the child; Linux 6.15 and later, once the child's parent has reaped it
(custody waits up to a second for that). Where the OS does not (macOS, older Linux), custody
exits 5 rather than claim a status it does not know. On Windows the grant is redeemed over the
giver's named pipe, and the giver duplicates its handle on the child's job into custody, which is
the cover: the job dies with custody's handle.

%s

EXIT STATUS
  N       the child's exit code (Windows; Linux 6.15+)
  128+N   the child was killed by signal N (Linux 6.15+)
  5       the child exited; its status is reported to its parent alone
  129     the owner ended (see --owner), and the child's group was stopped
  1       the grant was refused, custody could not take the child, or the owner was already
          gone; nothing changed
  2       bad flags or arguments
  11      the ledger lock was held too long by another process; nothing changed`

func newAdopt(g *globals) *cli.Command {
	o := &adoptOptions{globals: g}
	return &cli.Command{
		Name:        "adopt",
		Usage:       "Become the owner of a child another owner granted",
		UsageText:   "custody adopt [--grace D] [--owner parent|PID|self] GRANT",
		Description: fmt.Sprintf(adoptHelp, ownerHelp),
		Flags: []cli.Flag{
			graceFlag(&o.grace, " for what is left"),
			ownerFlag(&o.owner),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.NArg() != 1 {
				return usagef("adopt: requires exactly one GRANT, received %d", cmd.NArg())
			}
			o.grant = cmd.Args().First()
			return runAdopt(ctx, o)
		},
	}
}

func runAdopt(ctx context.Context, o *adoptOptions) error {
	ctx = context.WithoutCancel(ctx) // signals are forwarded, not taken as custody's own end
	tagEnv, err := o.tagName()
	if err != nil {
		return err
	}
	// Where no process can be identified (the BSDs), nothing can be owned: say that, first.
	if err := procid.Supported(); err != nil {
		return fmt.Errorf("adopt: %w", err)
	}
	// The owner is held before the grant is redeemed: one already gone leaves it unredeemed.
	served, err := takeOwner(o.owner)
	if err != nil {
		return err
	}
	if served != nil {
		defer served.Close()
	}
	l, err := o.open()
	if err != nil {
		return err
	}
	owner := o.newOwner(l, tagEnv, "adopt", o.grace, ownerID(served))
	defer owner.Supervisor.Close()
	defer owner.Close() // before the supervisor's: it stops what is left and removes its cgroups
	sigs := make(chan os.Signal, 8)
	if len(forwarded) > 0 {
		signal.Notify(sigs, forwarded...)
		defer signal.Stop(sigs)
	}
	child, err := owner.Adopt(ctx, o.grant)
	if err != nil {
		return err
	}
	for waiting := true; waiting; {
		select {
		case sig := <-sigs:
			child.Signal(sig)
		case <-child.Done():
			waiting = false
		case <-ownerDone(served):
			sayOwnerEnded(o.stderr, "adopt", served, child.ID.PID)
			if res := child.Stop(ctx, stop.Options{Grace: o.grace}); !res.OK() {
				fmt.Fprintf(o.stderr, "custody: warning: adopt: the child's group: %s: %s\n", res.Outcome, res.Reason)
			}
			return statusError{exitOwnerGone}
		}
	}
	if res := child.Stop(ctx, stop.Options{Grace: o.grace}); !res.OK() {
		fmt.Fprintf(o.stderr, "custody: warning: adopt: what is left of the child's group: %s: %s\n", res.Outcome, res.Reason)
	}
	code := adoptedStatus(child.Wait())
	if code == exitUnknown {
		// Silent, 5 would read as an answer about the child; it is the absence of one.
		fmt.Fprintf(o.stderr, "custody: adopt: pid %d exited, by its own exit or a signal: the OS tells how to its parent alone, so custody exits %d\n",
			child.ID.PID, exitUnknown)
	}
	return statusError{code}
}

// adoptedStatus maps an adopted child's end to adopt's exit status, as run does: the exit code,
// or 128+N for signal N; 5 when the OS did not say.
func adoptedStatus(err error) exitCode {
	if ee, ok := errors.AsType[*custody.ExitError](err); ok {
		if ee.Signal != 0 {
			return exitCode(128 + int(ee.Signal))
		}
		return exitCode(ee.Code)
	}
	if errors.Is(err, custody.ErrExitUnknown) {
		return exitUnknown
	}
	return exitStatus(err)
}
