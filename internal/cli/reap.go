package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/reap"
	"github.com/custody-dev/custody/stop"
)

type reapOptions struct {
	*globals
	dryRun  bool
	json    bool
	install string
	grace   time.Duration
}

const reapHelp = `Stop what crashed sessions left behind, only with proof. A row is reaped when all hold:
  - it is reapable: its reapable field is true, or absent with purpose serve, dashboard,
    gateway or mcp-helper (rows from 'custody run' and 'custody register' are, unless --keep);
  - its own identity is proven now (exact start, or create time within 2 s);
  - its spawner was recorded and is provably dead (a live PID with another start counts as
    dead); a row with no recorded spawner is never reaped;
  - it is neither this reaper nor one of its ancestors.
Unknown anywhere means keep. A reap stops the row's scope as 'custody stop' does. Every row's
decision is printed with its reason: reap (spawner-dead), gone (already-exited, other-boot: the
row is dropped), or keep (pid-reused, not-reapable, identity-unproven, spawner-alive,
spawner-unknown, no-spawner, self-or-ancestor, kernel-thread, other-user). Rows of every install
are considered: the rules above are the safety, whichever program wrote the row; --install ID
considers only one install's rows (the id 'custody ps' shows).

On Linux with cgroup scopes, reap then looks for the cgroup directories of dead owners (named
custody-<ns>-<pid>-<start>, where this user's owners make theirs): an empty one is removed (gone,
owner-dead); one with processes left is kept (keep, populated), for they are stopped through their
rows. Such a line shows "cgroup <path>" as its purpose and the dead owner's PID. Only directories
that a row considered names are decided so (a row's cgroup lies in it, or its owner or spawner
is the directory's owner): the others belong to another session's ledger, or, with --install, to
another install; they are listed apart after the table (in --json: keep, not-in-ledger) and left
alone.

A row is a claim, not a licence: its process must run as the ledger's owner (other-user), and is
never init or a kernel thread (kernel-thread); the ledger must be trusted (owned by you or root,
writable by nobody else, no symbolic links), or nothing is signalled. SIGINT or SIGTERM ends a
reap at once: rows not yet stopped are left alone.

EXIT STATUS
  0   every reaped row's outcome is exited or already-exited (or --dry-run)
  1   the ledger could not be read (a corrupt one is moved aside) or is not trusted, or dropping
      rows of exited processes failed; nothing was signalled
  2   bad flags or arguments; nothing was signalled
  3   some reaped row's outcome is no-authority, permission-denied or timed-out (others may have
      been signalled)
  4   processes were signalled and seen to exit, but the ledger could not be updated or the
      decisions not written; their rows stay until a later write prunes them
  11  the ledger lock was held too long by another process; nothing was signalled`

func newReap(g *globals) *cli.Command {
	o := &reapOptions{globals: g}
	return &cli.Command{
		Name:         "reap",
		Usage:        "Stop orphans of crashed sessions, only with proof",
		UsageText:    "custody reap [--dry-run] [--grace D] [--install ID] [--json]",
		Description:  reapHelp,
		ArgValidator: noArgs,
		Flags: []cli.Flag{
			allFlag(),
			&cli.BoolFlag{Name: "dry-run", Destination: &o.dryRun,
				Usage: "signal nothing, change nothing; report the same decisions"},
			graceFlag(&o.grace, ""),
			&cli.StringFlag{Name: "install", Destination: &o.install, Usage: "consider only the rows of this install id"},
			&cli.BoolFlag{Name: "json", Destination: &o.json, Usage: "print one JSON array of decisions"},
		},
		Action: func(ctx context.Context, _ *cli.Command) error { return runReap(ctx, o) },
	}
}

func runReap(ctx context.Context, o *reapOptions) error {
	l, err := o.open()
	if err != nil {
		return err
	}
	opts := reap.Options{DryRun: o.dryRun, Install: o.install, Stop: stop.Options{Grace: o.grace}}
	ds, err := reap.Run(ctx, l, opts)
	if ds == nil && err != nil {
		return fmt.Errorf("reap: %w; nothing was signalled", err)
	}
	err = errors.Join(err, printDecisions(o, ds))
	var results []stop.Result
	for _, d := range ds {
		if d.Result != nil {
			results = append(results, *d.Result)
		}
	}
	return afterSignals(results, err)
}

func printDecisions(o *reapOptions, ds []reap.Decision) error {
	if o.json {
		if ds == nil {
			ds = []reap.Decision{}
		}
		return writeJSON(o.stdout, ds)
	}
	bw := bufio.NewWriterSize(o.stdout, 64<<10) // tabwriter writes cell by cell: one syscall each
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tPURPOSE\tACTION\tREASON\tOUTCOME")
	var apart []reap.Decision
	for _, d := range ds {
		if d.Reason == reap.NotInLedger {
			apart = append(apart, d)
			continue
		}
		outcome := "-"
		switch {
		case d.Result != nil:
			outcome = d.Result.Outcome.String()
		case d.Action == reap.Reap && o.dryRun:
			outcome = "(dry run)"
		}
		purpose := cell(d.Purpose)
		if d.Cgroup != "" {
			purpose = "cgroup " + d.Cgroup
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", d.PID, purpose, d.Action, d.Reason, outcome)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(apart) > 0 {
		fmt.Fprintln(bw, "\nCgroup directories of dead owners that no row considered names, left alone (another")
		fmt.Fprintln(bw, "session's ledger, or another install's, names them):")
		for _, d := range apart {
			fmt.Fprintf(bw, "  %s  (owner pid %d)\n", d.Cgroup, d.PID)
		}
	}
	return bw.Flush()
}
