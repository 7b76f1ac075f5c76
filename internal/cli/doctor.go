package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

type doctorOptions struct {
	*globals
	json bool
}

const doctorHelp = `Report what this machine offers custody of what it uses (pidfd, pidfs ids, a process
group signalled through its leader's pidfd, a boot id), which containment your children get (a
cgroup of their own, a process group, or a job) and why, and the ledger's health and trust. A
missing feature is information: custody falls back (see each line). Doctor changes nothing, not
even a corrupt ledger.

On Linux the systemd line says whether custody asks a systemd user manager (on the session bus:
$DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus) for a transient unit with Delegate=yes, and
why: systemd-scope where your cgroup is yours but not writable or an undelegated unit's (a start
moves the owner into a new scope and makes its cgroups there); systemd-service where your cgroup
is root's, as an SSH session's is (custody run starts its child through custody agent in a new
service; other owners get process groups there); "not needed" where your own cgroup will do;
"not used" where no user manager answers. Doctor only asks whether the manager answers; it starts
no unit.

The ledger is trusted when it and its lock are regular files (no symbolic links, no FIFOs) owned
by you or root and writable by nobody else, in a directory owned by you or root that nobody else
may write, below directories nobody else may write (unless sticky, as /tmp). Every other verb
refuses an untrusted ledger; doctor says why, and reads nothing more of it.

EXIT STATUS
  0   the ledger is healthy and trusted (or absent)
  1   the ledger is corrupt (the next write moves it aside), cannot be read (permissions or
      I/O: nothing moves it, and every verb fails until it can be read), or is not trusted; or
      this OS is one where custody cannot identify processes (FreeBSD and the other BSDs)
  2   bad flags or arguments`

// check is one line of the report.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

type ledgerHealth struct {
	Path    string `json:"path"`
	Exists  bool   `json:"exists"`
	Mode    string `json:"mode,omitempty"`
	Rows    int    `json:"rows"`
	Corrupt string `json:"corrupt,omitempty"`
	// Unreadable is why the ledger could not be read (permissions, I/O), when it is not corrupt:
	// nothing moves it aside, and every verb fails until it can be read.
	Unreadable  string   `json:"unreadable,omitempty"`
	Quarantined []string `json:"quarantined,omitempty"`
	Lock        string   `json:"lock"`
	// Trust is "ok", or why every verb refuses the ledger (see ledger.Ledger.Trust).
	Trust string `json:"trust"`
}

type doctorReport struct {
	OS       string       `json:"os"`
	Features []check      `json:"features"`
	Ledger   ledgerHealth `json:"ledger"`
}

func newDoctor(g *globals) *cli.Command {
	o := &doctorOptions{globals: g}
	return &cli.Command{
		Name:         "doctor",
		Usage:        "Report what this machine offers and the ledger's health",
		UsageText:    "custody doctor [--json]",
		Description:  doctorHelp,
		ArgValidator: noArgs,
		Flags:        []cli.Flag{&cli.BoolFlag{Name: "json", Destination: &o.json, Usage: "print one JSON document"}},
		Action:       func(ctx context.Context, _ *cli.Command) error { return runDoctor(ctx, o) },
	}
}

func runDoctor(ctx context.Context, o *doctorOptions) error {
	l, err := o.open()
	if err != nil {
		return err
	}
	rep := doctorReport{OS: runtime.GOOS + "/" + runtime.GOARCH, Features: features()}
	rep.Ledger = health(ctx, l)
	if o.json {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printDoctor(o, rep)
	}
	if rep.Ledger.Corrupt != "" || rep.Ledger.Unreadable != "" || rep.Ledger.Trust != "ok" || procid.Supported() != nil {
		return statusError{exitError}
	}
	return nil
}

func printDoctor(o *doctorOptions, rep doctorReport) {
	fmt.Fprintf(o.stdout, "system   %s\n", rep.OS)
	for _, c := range rep.Features {
		mark := "ok"
		if !c.OK {
			mark = "no"
		}
		fmt.Fprintf(o.stdout, "%-22s %-3s %s\n", c.Name, mark, c.Detail)
	}
	h := rep.Ledger
	fmt.Fprintf(o.stdout, "ledger   %s\n", h.Path)
	if h.Trust != "ok" {
		fmt.Fprintf(o.stdout, "  trust  refused: %s (every verb refuses it)\n", h.Trust)
		return
	}
	fmt.Fprintf(o.stdout, "  trust  ok\n")
	switch {
	case h.Corrupt != "":
		fmt.Fprintf(o.stdout, "  state  corrupt: %s (the next write moves it aside)\n", h.Corrupt)
	case h.Unreadable != "":
		fmt.Fprintf(o.stdout, "  state  unreadable: %s (nothing is moved aside; every verb fails until it can be read)\n", h.Unreadable)
	case !h.Exists:
		fmt.Fprintf(o.stdout, "  state  absent (created at the first registration)\n")
	default:
		fmt.Fprintf(o.stdout, "  state  %d rows, mode %s\n", h.Rows, h.Mode)
	}
	fmt.Fprintf(o.stdout, "  lock   %s\n", h.Lock)
	for _, q := range h.Quarantined {
		fmt.Fprintf(o.stdout, "  aside  %s\n", q)
	}
}

// containmentCheck says which scope this user's children get, and why: the cgroup is proven by
// making the owner's directory (removed again at once).
func containmentCheck() check {
	kind, where, why := scope.Containment()
	switch kind {
	case scope.KindCgroup:
		return check{Name: "containment", OK: true, Detail: "cgroup: each child in a cgroup of its own in " + where +
			"/custody-<owner>/; nothing it starts leaves it by setsid, setpgid or forking, only by writing a cgroup.procs outside it"}
	case scope.KindJob:
		return check{Name: "containment", OK: true, Detail: "job: each child in a job object that dies with its owner"}
	}
	return check{Name: "containment", Detail: fmt.Sprintf("process-group: %v; a descendant that calls setsid or "+
		"setpgid leaves its child's group, and is still stopped with it by the scope id in its environment ($%s), "+
		"unless it also execs with a cleared environment; %s", why, scope.EnvScopeID, containerRecipe)}
}

func bootCheck() check {
	id, err := procid.BootID()
	if err != nil {
		return check{Name: "boot id", Detail: err.Error() + "; rows are matched by start time only"}
	}
	return check{Name: "boot id", OK: true, Detail: id}
}

// health inspects the ledger without changing it.
func health(ctx context.Context, l *ledger.Ledger) ledgerHealth {
	h := ledgerHealth{Path: l.Path(), Trust: "ok"}
	if err := l.Trust(); err != nil {
		h.Trust = err.Error()
		return h // reading on could block (a FIFO) or follow a link where the ledger should be
	}
	if fi, err := os.Lstat(l.Path()); err == nil {
		h.Exists, h.Mode = true, fi.Mode().Perm().String()
	}
	h.Quarantined, _ = filepath.Glob(l.Path() + ".corrupt*")
	rows, err := ledger.Peek(l.Path())
	var ce *ledger.CorruptError
	switch {
	case errors.As(err, &ce):
		h.Corrupt = ce.Reason
	case err != nil:
		h.Unreadable = err.Error()
	}
	h.Rows = len(rows)
	h.Lock = "free"
	if err := l.CheckLock(ctx, 200*time.Millisecond); err != nil {
		h.Lock = err.Error()
	}
	return h
}
