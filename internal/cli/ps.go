package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/ledger"
)

type psOptions struct {
	*globals
	all  bool
	json bool
}

const psHelp = `List the ledger's rows that are not provably dead, with each one's state and its spawner's
state: alive, dead, unknown (it could not be read), or unrecorded. Only rows of this install are
listed unless --all is given.

A corrupt ledger is moved aside to <ledger>.corrupt and said so on stderr; the list is then empty.

EXIT STATUS
  0   the rows were listed
  1   the ledger could not be read
  2   bad flags or arguments`

func newPs(g *globals) *cli.Command {
	o := &psOptions{globals: g}
	return &cli.Command{
		Name:         "ps",
		Usage:        "List registered processes and whether they live",
		UsageText:    "custody ps [--all] [--json]",
		Description:  psHelp,
		ArgValidator: noArgs,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Destination: &o.all, Usage: "include rows of other installs"},
			&cli.BoolFlag{Name: "json", Destination: &o.json,
				Usage: "print one JSON array of rows with state and spawner_state added"},
		},
		Action: func(ctx context.Context, _ *cli.Command) error { return runPs(ctx, o) },
	}
}

func runPs(ctx context.Context, o *psOptions) error {
	l, err := o.open()
	if err != nil {
		return err
	}
	rows, err := l.Rows(ctx)
	if ce, ok := errors.AsType[*ledger.CorruptError](err); ok {
		fmt.Fprintf(o.stderr, "custody: warning: %v; listing no rows\n", ce)
		err = nil
	}
	if err != nil {
		return err
	}
	q := ledger.Query{}
	if !o.all {
		q.Install = o.install()
	}
	entries := ledger.Judge(rows, q)
	if o.json {
		return writePsJSON(o.stdout, entries)
	}
	return writePsTable(o.stdout, entries, time.Now())
}

// writePsJSON prints each row's own bytes with state and spawner_state added, so fields written by
// other programs pass through untouched.
func writePsJSON(w io.Writer, entries []ledger.Entry) error {
	b := bufio.NewWriterSize(w, 64<<10) // streamed: a whole 1,000-row document would be 450 KB
	b.WriteString("[")
	for i, e := range entries {
		raw, err := e.Raw()
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		writeWithStates(b, raw, e.State.String(), e.SpawnerState)
	}
	b.WriteString("\n]\n")
	return b.Flush()
}

// writeWithStates writes a JSON object's bytes with the two state fields added, replacing any
// that another program wrote under those names, without re-encoding or copying the rest.
func writeWithStates(b *bufio.Writer, raw []byte, state, spawner string) {
	if bytes.Contains(raw, []byte(`"state"`)) || bytes.Contains(raw, []byte(`"spawner_state"`)) {
		if r, err := ledger.Reparse(raw); err == nil {
			r.Set("state", state)
			r.Set("spawner_state", spawner)
			out, _ := r.Raw()
			b.Write(out)
			return
		}
	}
	obj := bytes.TrimRight(raw, " \t\r\n")
	obj = obj[:len(obj)-1] // the closing brace
	b.Write(obj)
	if len(bytes.TrimSpace(obj)) > 1 {
		b.WriteByte(',')
	}
	b.WriteString(`"state":"`)
	b.WriteString(state)
	b.WriteString(`","spawner_state":"`)
	b.WriteString(spawner)
	b.WriteString(`"}`)
}

func writePsTable(w io.Writer, entries []ledger.Entry, now time.Time) error {
	bw := bufio.NewWriterSize(w, 64<<10) // tabwriter writes cell by cell: one syscall each
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tPURPOSE\tSTATE\tSPAWNER\tSPAWNER STATE\tAGE\tARGV")
	for _, e := range entries {
		spawner := "-"
		if e.SpawnerPID != nil {
			spawner = strconv.Itoa(*e.SpawnerPID)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.PID, dash(e.Purpose), e.State, spawner,
			e.SpawnerState, age(e.CreateTime, now), dash(e.Argv))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age prints how long ago the process started, to the two largest units.
func age(create *float64, now time.Time) string {
	if create == nil {
		return "-"
	}
	d := now.Sub(time.Unix(0, int64(*create*1e9)))
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(math.Mod(d.Seconds(), 60)))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(math.Mod(d.Minutes(), 60)))
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
