package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/ledger"
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
  already-exited     it had exited before; nothing was signalled
  no-authority       its identity could not be proven, or it has no ledger row; nothing was signalled
  permission-denied  the OS refused the signal
  timed-out          signalled, but no exit was seen in time

Rows of processes seen gone are dropped from the ledger.

EXIT STATUS
  0   every outcome is exited or already-exited
  1   the ledger could not be read; nothing was signalled
  2   bad flags or arguments (such as a PID that is not a positive integer); nothing was signalled
  3   some outcome is no-authority, permission-denied or timed-out
  11  the ledger lock was held too long when dropping rows`

func newStop(g *globals) *cli.Command {
	o := &stopOptions{globals: g}
	return &cli.Command{
		Name:         "stop",
		Usage:        "Stop ledgered processes through proven authority",
		UsageText:    "custody stop [--grace D] [--json] PID...",
		Description:  stopHelp,
		ArgValidator: minArgs(1),
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "grace", Value: stop.DefaultGrace, Destination: &o.grace,
				Usage: "time between SIGTERM and SIGKILL"},
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
	if o.grace <= 0 {
		return usagef("stop: --grace must be positive")
	}
	l, err := o.open()
	if err != nil {
		return err
	}
	rows, err := l.Rows(ctx)
	if err != nil {
		return fmt.Errorf("stop: %w; nothing was signalled", err)
	}
	results := make([]stop.Result, len(pids))
	var gone []ledger.Row
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, pid := range pids {
		row, ok := findRow(rows, pid)
		if !ok {
			results[i] = stop.Result{PID: pid, Outcome: stop.NoAuthority, Reason: fmt.Sprintf("no ledger row for pid %d", pid)}
			continue
		}
		wg.Go(func() {
			results[i] = stop.Row(ctx, row, stop.Options{Grace: o.grace})
			if results[i].OK() {
				mu.Lock()
				gone = append(gone, row)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := printResults(o.stdout, results, o.json); err != nil {
		return err
	}
	if err := l.Drop(ctx, gone); err != nil {
		return err
	}
	for _, r := range results {
		if !r.OK() {
			return statusError{exitUnproven}
		}
	}
	return nil
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
	fmt.Fprintln(tw, "PID\tOUTCOME\tFORCED\tREASON")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.PID, r.Outcome, yesNo(r.Forced), dash(r.Reason))
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
