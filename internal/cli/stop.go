package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/stop"
)

type stopOptions struct {
	*globals
	grace time.Duration
	json  bool
	pids  []string
}

const stopHelp = `Stop ledgered processes through proven authority. For each PID, custody opens a handle on
the process (a pidfd on Linux), proves through it that it is the incarnation its ledger row
records, and only then signals: SIGTERM to its scope (its process group, when custody started
it in one), then SIGKILL after the grace. Each PID gets one outcome:

  exited             seen to exit after the stop (a group: every member)
  already-exited     it had exited before (or no process has the PID); nothing was signalled
  no-authority       nothing was signalled: its identity could not be proven, it has no ledger
                     row, it runs as another user than the ledger's owner, or it is init, a
                     kernel thread, custody itself or one of custody's ancestors
  permission-denied  the OS refused the signal
  timed-out          signalled, but no exit was seen in time

Rows of processes seen gone are dropped from the ledger. The ledger must be trusted (owned by
you or root, writable by nobody else, no symbolic links): otherwise nothing is signalled.

EXIT STATUS
  0   every outcome is exited or already-exited
  1   the ledger could not be read or is not trusted; nothing was signalled
  2   bad flags or arguments (such as a PID that is not a positive integer); nothing was signalled
  3   some outcome is no-authority, permission-denied or timed-out (others may have been signalled)
  4   processes were signalled and seen to exit, but the ledger could not be updated or the
      outcomes not written; their rows stay until a later write prunes them
  11  the ledger lock was held too long by another process; nothing was signalled`

func newStop(g *globals) *cli.Command {
	o := &stopOptions{globals: g}
	return &cli.Command{
		Name:         "stop",
		Usage:        "Stop ledgered processes through proven authority",
		UsageText:    "custody stop [--grace D] [--json] PID...",
		Description:  stopHelp,
		ArgValidator: needArgs("at least one PID"),
		Flags: []cli.Flag{
			graceFlag(&o.grace, ""),
			&cli.BoolFlag{Name: "json", Destination: &o.json, Usage: "print one JSON array of outcomes"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			o.pids = cmd.Args().Slice()
			return runStop(ctx, o)
		},
	}
}

func runStop(ctx context.Context, o *stopOptions) error {
	var pids []int
	for _, s := range o.pids {
		pid, err := parsePID(s)
		if err != nil {
			return err
		}
		pids = append(pids, pid)
	}
	l, err := o.open()
	if err != nil {
		return err
	}
	rows, err := l.Rows(ctx)
	if err != nil {
		return fmt.Errorf("stop: %w; nothing was signalled", err)
	}
	uid, err := l.Owner()
	if err != nil {
		return fmt.Errorf("stop: %w; nothing was signalled", err)
	}
	opts := stop.Options{Grace: o.grace, Owner: &uid}
	results := make([]stop.Result, len(pids))
	var gone []ledger.Row
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, pid := range pids {
		row, ok := findRow(rows, pid)
		if !ok {
			results[i] = noRow(pid)
			continue
		}
		wg.Go(func() {
			o := opts
			o.ScopeID = row.Decoded().ScopeID
			results[i] = stop.Recorded(ctx, row.Record(), row.ScopeDesc(), o)
			if results[i].OK() {
				mu.Lock()
				gone = append(gone, row)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	err = errors.Join(printResults(o.stdout, results, o.json), l.Drop(ctx, gone))
	return afterSignals(results, err)
}

// noRow is the outcome for a PID without a ledger row: already-exited when no process has it
// (another stop may just have stopped it and dropped its row), no-authority otherwise.
func noRow(pid int) stop.Result {
	if _, err := procid.Read(pid); errors.Is(err, procid.ErrGone) {
		return stop.Result{PID: pid, Outcome: stop.AlreadyExited, Reason: fmt.Sprintf("no process has pid %d, and no ledger row names it", pid)}
	}
	return stop.Result{PID: pid, Outcome: stop.NoAuthority, Reason: fmt.Sprintf("no ledger row for pid %d", pid)}
}

// afterSignals maps what a stop or reap did, and err from what followed (dropping rows, printing),
// to the command's error, so that the exit status never claims less than happened: once a
// signal was sent, a failure is never the status that says nothing was.
func afterSignals(results []stop.Result, err error) error {
	signalled, unproven := false, false
	for _, r := range results {
		signalled = signalled || r.Outcome == stop.Exited || r.Outcome == stop.TimedOut
		unproven = unproven || !r.OK()
	}
	switch {
	case unproven && err != nil:
		return codedError{exitUnproven, err}
	case unproven:
		return statusError{exitUnproven}
	case err != nil && signalled:
		return codedError{exitStale, err}
	}
	return err
}

// findRow returns the newest row for pid, of any install: the caller named the PID.
func findRow(rows []ledger.Row, pid int) (ledger.Row, bool) {
	var found ledger.Row
	ok := false
	for _, r := range rows {
		if r.PID == pid && (!ok || r.RegisteredAt >= found.RegisteredAt) {
			found, ok = r, true
		}
	}
	return found, ok
}

func printResults(w io.Writer, results []stop.Result, asJSON bool) error {
	if asJSON {
		return writeJSON(w, results)
	}
	bw := bufio.NewWriter(w) // tabwriter writes cell by cell: one syscall each
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tOUTCOME\tREQUEST\tFORCED\tREASON")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.PID, r.Outcome, dash(r.Request), yesNo(r.Forced), dash(r.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
