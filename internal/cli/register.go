package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

type registerOptions struct {
	*globals
	pid     string
	purpose string
	keep    bool
	host    string
	port    int
}

const registerHelp = `Record a process the caller started itself. The spawner recorded is the calling process
(custody's parent), with its exact start, so that 'custody reap' can later tell whether it died.
The process's own exact start is read now: register it while it surely lives.

The row is reapable (reap may stop it once its spawner is provably dead) unless --keep is given.

A row is a claim that stop and reap act on, so register refuses init, kernel threads, custody
itself and its ancestors (the shell that runs it), and, unless the caller is root, a process of
another user. The ledger must be trusted (owned by you or root, writable by nobody else, no
symbolic links).

EXIT STATUS
  0   the row was written
  1   the process does not exist, cannot be read or is refused, or the ledger is not trusted or
      cannot be written; nothing was written
  2   bad flags or arguments; nothing was written
  11  the ledger lock was held too long by another process; nothing was written`

func newRegister(g *globals) *cli.Command {
	o := &registerOptions{globals: g}
	return &cli.Command{
		Name:         "register",
		Usage:        "Record a child process the caller started",
		UsageText:    "custody register --pid PID [--purpose P] [--keep] [--host H] [--port N]",
		Description:  registerHelp,
		ArgValidator: noArgs,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "host", Destination: &o.host, Usage: "host the process serves on, if any"},
			&cli.BoolFlag{Name: "keep", Destination: &o.keep, Usage: "never let reap stop it"},
			// Checked by runRegister rather than Required: a missing --pid is then a usage error.
			&cli.StringFlag{Name: "pid", Destination: &o.pid, Usage: "the process to record (required)"},
			&cli.IntFlag{Name: "port", Destination: &o.port, HideDefault: true,
				Usage: "port the process serves on, if any"},
			&cli.StringFlag{Name: "purpose", Value: custody.DefaultPurpose, Destination: &o.purpose,
				Usage: "what it is for: serve, gateway, mcp-helper, …"},
		},
		Action: func(ctx context.Context, _ *cli.Command) error { return runRegister(ctx, o) },
	}
}

// parsePID accepts a decimal PID > 0 that fits a pid_t (32-bit on every OS custody supports).
func parsePID(s string) (int, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n <= 0 {
		return 0, usagef("pid %q: not a positive integer", s)
	}
	return int(n), nil
}

func runRegister(ctx context.Context, o *registerOptions) error {
	if o.pid == "" {
		return usagef("register: --pid is required")
	}
	pid, err := parsePID(o.pid)
	if err != nil {
		return err
	}
	if err := checkPurpose(o.purpose); err != nil {
		return err
	}
	if o.port < 0 || o.port > 65535 {
		return usagef("--port %d: not within 0..65535", o.port)
	}
	// A pidfd first, then the read that proves it names the process read; the row then carries
	// the process's pidfs id where the kernel has them.
	inc, err := procid.ReadExact(pid)
	if errors.Is(err, procid.ErrGone) {
		return fmt.Errorf("register %d: no such process", pid)
	}
	if err != nil {
		return fmt.Errorf("register %d: cannot prove its identity: %w", pid, err)
	}
	if err := mayRegister(pid); err != nil {
		return fmt.Errorf("register %d: %w", pid, err)
	}
	// The spawner is the caller; if it cannot be read the row records none rather than a guess.
	spawner, _ := procid.ReadExact(os.Getppid())
	row := ledger.NewRow(inc, spawner)
	row.Purpose, row.Install, row.Host = o.purpose, o.install(), o.host
	row.Reapable = &[]bool{!o.keep}[0]
	if o.port > 0 {
		row.Port = &o.port
	}
	l, err := o.open()
	if err != nil {
		return err
	}
	rep, err := l.Add(ctx, row)
	if rep.Quarantined != nil {
		fmt.Fprintf(o.stderr, "custody: warning: %v\n", rep.Quarantined)
	}
	return err
}

// mayRegister refuses what no row may name: a protected process (see [authority.Guard]), and,
// unless the caller is root, another user's process. The owner is checked after the identity was
// read: a stranger that took the PID since can only make this refuse.
func mayRegister(pid int) error {
	if err := authority.Refuse(pid); err != nil {
		return err
	}
	if uid := os.Getuid(); uid != 0 {
		return authority.CheckOwner(pid, uid)
	}
	return nil
}
