package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
)

type psOptions struct {
	*globals
	install string
	json    bool
}

const psHelp = `List the ledger's rows that are not provably dead, with each one's state and its spawner's
state: alive, dead, unknown (it could not be read), or unrecorded. A row whose process has exited
is listed too, with state exited, while the scope its row records still holds processes (a daemon
it left in its cgroup, the rest of the process group it led): they are custody's until a stop or
a reap of that row ends them. Every row of the ledger is listed (the ledger is the user's own);
--install ID lists only the rows of one install, the 12-hex-digit id in the INSTALL column, which
hashes the directory the spawning program ran from.

Columns: PID, STATE, AGE (since the process started), OWNER (the PID of the owner whose supervisor
covers it), CALLER (the process that owner serves, whose end ends the child: custody run's and
adopt's caller, or the process --owner named; - for --owner self and for a program that owns its
children itself), SPAWNER and SPAWNER_STATE, CONTAINMENT, PURPOSE, INSTALL, and ARGV (quoted; a
trailing … marks a cut). Other programs write rows too: a field holding a space, a quote, a control
character or a terminal escape is shown quoted, with such characters escaped (\t, \n, \x1b), so
that it can neither split a row nor reach the terminal. An empty field shows as -.

CONTAINMENT says what holds each process and what it starts: cgroup (nothing leaves it by
setsid, setpgid or forking), process-group (a descendant that calls setsid or setpgid leaves it)
or job (Windows). A row whose
spawner is another listed process is shown under it, indented: the children of a nested owner
(an owned child that owns children itself) sit under that owner. In cgroups, a row whose spawner
is not listed (a nested owner started by a listed shell) sits under the row whose cgroup holds
its own.

A corrupt ledger is reported on stderr and listed as nothing, with exit 1: ps changes nothing,
and the file stays where it is until the next write moves it aside to <ledger>.corrupt.

EXIT STATUS
  0   the rows were listed
  1   the ledger could not be read, or is corrupt (nothing was listed or moved)
  2   bad flags or arguments`

func newPs(g *globals) *cli.Command {
	o := &psOptions{globals: g}
	return &cli.Command{
		Name:         "ps",
		Usage:        "List registered processes and whether they live",
		UsageText:    "custody ps [--install ID] [--json]",
		Description:  psHelp,
		ArgValidator: noArgs,
		Flags: []cli.Flag{
			allFlag(),
			&cli.StringFlag{Name: "install", Destination: &o.install, Usage: "list only the rows of this install id"},
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
	q := ledger.Query{Install: o.install, Remains: scopeRemains}
	var entries []ledger.Entry
	if o.json { // the rows' own bytes are printed: only what judging reads is decoded
		entries, err = l.Query(ctx, q)
	} else {
		var rows []ledger.Row
		if rows, err = l.Rows(ctx); err == nil {
			entries = ledger.Judge(rows, q)
		}
	}
	if _, ok := errors.AsType[*ledger.CorruptError](err); ok {
		// A listing changes nothing: the file stays for the next write to move aside.
		return fmt.Errorf("ps: %w; nothing listed, nothing moved (the next write moves it aside)", err)
	}
	if err != nil {
		return err
	}
	if o.json {
		return writePsJSON(o.stdout, entries)
	}
	return writePsTable(o.stdout, entries, time.Now())
}

// scopeRemains keeps the row of a process that is gone while the scope its row records still
// holds processes (see stop.Remains): the daemon a leader left in its cgroup is custody's until a
// stop or a reap of that row ends it, and a listing that hid the row would hide it too.
func scopeRemains(r *ledger.Row) bool {
	full := r.Decoded() // a query decodes only what judging reads; the scope's fields are needed
	return stop.Remains(full.Record(), full.ScopeDesc())
}

// stateWord is the STATE a row is listed with: its process's state, or "exited" for a process
// that is gone, listed for what its scope still holds (see scopeRemains).
func stateWord(e ledger.Entry) string {
	if e.State == procid.Dead {
		return "exited"
	}
	return e.State.String()
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
		if err := writeWithStates(b, raw, e.Foreign(), stateWord(e), e.SpawnerState); err != nil {
			return fmt.Errorf("ps: pid %d: %w", e.PID, err)
		}
	}
	if len(entries) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n") // "[]" for no rows, as reap --json prints it
	return b.Flush()
}

// writeWithStates writes a JSON object's bytes with the two state fields added, replacing any
// that another program wrote under those names, without re-encoding or copying the rest.
//
// A row that names those fields and cannot be rewritten (its bytes hold a NaN, which the
// rewrite's decoder refuses) is an error: written as it is, it would carry the other program's
// states as custody's, and appended to, it would name each field twice.
//
// Only a foreign row (see [ledger.Row.Foreign]) can name them, and only such a row is searched:
// `state"` ends "state" and "spawner_state" alike (and, harmlessly, any other name ending so,
// which takes the slow path for nothing), and a backslash may spell either name in escapes.
func writeWithStates(b *bufio.Writer, raw []byte, foreign bool, state, spawner string) error {
	if foreign && (bytes.Contains(raw, []byte(`state"`)) || bytes.IndexByte(raw, '\\') >= 0) {
		r, err := ledger.Reparse(raw)
		if err == nil {
			err = r.Set("state", state)
		}
		if err == nil {
			err = r.Set("spawner_state", spawner)
		}
		var out []byte
		if err == nil {
			out, err = r.Raw()
		}
		if err != nil {
			return fmt.Errorf("add the state fields: %w", err)
		}
		b.Write(out)
		return nil
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
	return nil
}

func writePsTable(w io.Writer, entries []ledger.Entry, now time.Time) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	rows := make([][]string, 0, 1+len(entries))
	rows = append(rows, []string{"PID", "STATE", "AGE", "OWNER", "CALLER", "SPAWNER", "SPAWNER_STATE", "CONTAINMENT", "PURPOSE", "INSTALL", "ARGV"})
	for _, n := range nest(entries) {
		e := n.e
		rows = append(rows, []string{strings.Repeat("  ", n.depth) + strconv.Itoa(e.PID),
			stateWord(e), age(e.CreateTime, now), pidOrDash(e.Owner), pidOrDash(e.CallerPID), pidOrDash(e.SpawnerPID), e.SpawnerState,
			cell(containment(*e.Row)), cell(e.Purpose), cell(e.Install), argvCell(e.Argv)})
	}
	writeColumns(bw, rows)
	return bw.Flush()
}

// nested is a row and how deep it sits in the tree of owners.
type nested struct {
	e     ledger.Entry
	depth int
}

// nest orders rows as a tree: a row whose spawner is the process another row names (the same
// incarnation) comes right after it, indented one level further. An owner running inside another
// owner's scope (a nested owner) is such a row, and its children are its rows. A nested owner
// that is not itself a row (started by a shell that is one, say) leaves its children's rows a
// spawner that is not listed: in cgroups they sit under the row whose cgroup holds theirs. Rows
// with neither are roots, in ledger order.
func nest(entries []ledger.Entry) []nested {
	type key struct {
		pid   int
		start uint64
	}
	keyOf := func(pid int, start *uint64) key {
		k := key{pid: pid}
		if start != nil {
			k.start = *start
		}
		return k
	}
	index := map[key]int{}
	byCgroup := map[string]int{}
	for i, e := range entries {
		index[keyOf(e.PID, e.StartTicks)] = i
		if e.Cgroup != "" {
			byCgroup[path.Clean(e.Cgroup)] = i
		}
	}
	// within returns the row whose cgroup is the nearest to hold cg, below it.
	within := func(cg string) (int, bool) {
		for d := path.Dir(path.Clean(cg)); d != "/" && d != "."; d = path.Dir(d) {
			if p, ok := byCgroup[d]; ok {
				return p, true
			}
		}
		return -1, false
	}
	kids := make([][]int, len(entries))
	var roots []int
	for i, e := range entries {
		p, ok := -1, false
		if e.SpawnerPID != nil {
			p, ok = index[keyOf(*e.SpawnerPID, e.SpawnerStartTicks)]
		}
		if !ok && e.Cgroup != "" {
			p, ok = within(e.Cgroup)
		}
		if ok && p != i {
			kids[p] = append(kids[p], i)
		} else {
			roots = append(roots, i)
		}
	}
	out := make([]nested, 0, len(entries))
	seen := make([]bool, len(entries))
	var walk func(i, depth int)
	walk = func(i, depth int) {
		if seen[i] { // a cycle of recycled PIDs: each row once
			return
		}
		seen[i] = true
		out = append(out, nested{entries[i], depth})
		for _, k := range kids[i] {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	for i := range entries { // rows only in cycles
		if !seen[i] {
			walk(i, 0)
		}
	}
	return out
}

// containment names a row's containment, from its own field or, for rows written before it
// existed, from its scope.
func containment(r ledger.Row) string {
	switch {
	case r.Containment != "":
		return r.Containment
	case r.Scope != "":
		return scope.Kind(r.Scope).Containment()
	}
	return "-"
}

func pidOrDash(pid *int) string {
	if pid == nil {
		return "-"
	}
	return strconv.Itoa(*pid)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cell prints a field another program may have written: "-" when empty, as it is when it holds
// only printable characters and no space, quote or backslash, and quoted otherwise (strconv.Quote:
// \t, \n, \x1b …). A tab would shift the columns, a newline split the row, and an escape
// sequence reach the terminal raw.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if plain(s) {
		return s
	}
	return strconv.Quote(s)
}

func plain(s string) bool {
	for _, r := range s {
		if r == ' ' || r == '"' || r == '\\' || !unicode.IsGraphic(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// maxArgv is how many characters of argv the table shows before it cuts.
const maxArgv = 60

// argvCell prints argv quoted, so its spaces read as one field, cut to maxArgv characters with a
// trailing … outside the quotes when longer.
func argvCell(argv string) string {
	if argv == "" {
		return "-"
	}
	if r := []rune(argv); len(r) > maxArgv {
		return strconv.Quote(string(r[:maxArgv])) + "…"
	}
	return strconv.Quote(argv)
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
