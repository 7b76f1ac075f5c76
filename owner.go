package custody

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
	"github.com/custody-dev/custody/tag"
)

// Owner starts and owns child processes. The zero Owner is ready to use: it records children in
// the default ledger, stamps the default tag variable, and (Unix) starts its supervisor at the
// first child. Set fields before the first Start. Methods are safe for concurrent use.
type Owner struct {
	// Ledger records each child; nil opens the default ledger (see [ledger.Resolve]).
	Ledger *ledger.Ledger
	// Install is the install id for rows and tags; empty derives it from the executable's
	// directory (see [tag.Install]).
	Install string
	// TagEnv names the spawn tag variable; empty means [tag.EnvName]("").
	TagEnv string
	// Supervisor covers children on Unix; nil starts one that re-executes this binary (which
	// must call [Init] first thing in main). Unused on Windows, where the job handle covers.
	Supervisor *supervise.Client

	once    sync.Once
	initErr error
	self    procid.Incarnation
}

// StartOptions describes one child.
type StartOptions struct {
	// Purpose is what the child is for (serve, gateway, mcp-helper, …); empty means "helper".
	Purpose string
	// Keep makes the row not reapable: reap never stops it, even after the owner crashed.
	Keep bool
	// Generation, when non-nil, is recorded in the row (see [Slot]).
	Generation *int
	// SharedConsole is for an interactive child the user drives from the console: on Windows it
	// stays in the owner's console process group and takes Ctrl+C (see
	// [scope.PrepareSharedConsole]); elsewhere it changes nothing.
	SharedConsole bool
}

func (o *Owner) init() error {
	o.once.Do(func() {
		if o.Ledger == nil {
			p, err := ledger.Resolve("")
			if err != nil {
				o.initErr = err
				return
			}
			o.Ledger = ledger.Open(p)
		}
		if o.Install == "" {
			o.Install = tag.Install("")
		}
		if o.TagEnv == "" {
			o.TagEnv = tag.EnvName("")
		}
		if o.Supervisor == nil {
			o.Supervisor = &supervise.Client{}
		}
		o.self, o.initErr = procid.Self()
	})
	return o.initErr
}

// Start starts cmd as an owned child: in a scope of its own taken at spawn, stamped with the
// spawn tag, covered against the owner's death, recorded in the ledger, with its spawn-time handle
// retained. On any failure after the process started, it is killed and reaped before Start
// returns, so no unowned child is left. Do not call cmd.Wait: [Child.Wait] does.
func (o *Owner) Start(ctx context.Context, cmd *exec.Cmd, opts StartOptions) (c *Child, err error) {
	if err := o.init(); err != nil {
		return nil, fmt.Errorf("custody: start: %w", err)
	}
	purpose := opts.Purpose
	if purpose == "" {
		purpose = "helper"
	}
	t := tag.Tag{Install: o.Install, Purpose: purpose, SpawnerPID: o.self.PID, SpawnerCreate: &o.self.CreateTime}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("custody: start: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, o.TagEnv+"="+t.String())
	prepare := scope.Prepare
	if opts.SharedConsole {
		prepare = scope.PrepareSharedConsole
	}
	if err := prepare(cmd); err != nil {
		return nil, fmt.Errorf("custody: start: %w", err)
	}
	if err := o.warm(); err != nil {
		return nil, fmt.Errorf("custody: start: %w", err)
	}
	// The ledger write is prepared while the child execs (lock, read, prune, the kept rows written
	// into the temporary file), so that recording the row after the start costs one short write
	// and the rename.
	txc := make(chan txnResult, 1)
	go func() {
		tx, err := o.Ledger.BeginAppend(ctx)
		txc <- txnResult{tx, err}
	}()
	if err := cmd.Start(); err != nil {
		(<-txc).abort()
		return nil, fmt.Errorf("custody: start: %w", err)
	}
	c = &Child{Cmd: cmd, owner: o, done: make(chan struct{})}
	defer func() {
		if err != nil {
			c.abort()
			err = fmt.Errorf("custody: start %s: %w", cmd.Path, err)
		}
	}()
	if c.scope, err = scope.Attach(cmd); err != nil {
		(<-txc).abort()
		return nil, err
	}
	c.ID = c.scope.Leader()
	if err = o.cover(c.scope); err != nil {
		(<-txc).abort()
		return nil, err
	}
	c.covered = true
	if c.proc, err = authority.FromOS(cmd.Process); err != nil {
		(<-txc).abort()
		return nil, err
	}
	go c.reap()
	if err = c.record(<-txc, purpose, opts); err != nil {
		return nil, err
	}
	return c, nil
}

type txnResult struct {
	tx  *ledger.Txn
	err error
}

func (r txnResult) abort() {
	if r.tx != nil {
		r.tx.Abort()
	}
}

// record commits the child's ledger row in the prepared write.
func (c *Child) record(txr txnResult, purpose string, opts StartOptions) error {
	if txr.err != nil {
		return txr.err
	}
	inc, err := procid.Read(c.ID.PID)
	if err != nil && !errors.Is(err, procid.ErrGone) {
		txr.abort()
		return err
	}
	if err != nil { // it already exited: record what the scope read at spawn
		inc = procid.Incarnation{ID: c.ID}
	}
	o := c.owner
	row := ledger.NewChildRow(inc, o.self, c.Cmd.Args)
	row.Purpose, row.Install, row.Scope = purpose, o.Install, string(c.scope.Kind())
	row.Reapable = ptr(!opts.Keep)
	row.Generation = opts.Generation
	row.Owner = ptr(o.self.PID)
	if pg := c.scope.PGID(); pg > 0 {
		row.PGID = ptr(pg)
	}
	if _, err := txr.tx.Append(row); err != nil {
		return err
	}
	c.row = row
	return nil
}

func ptr[T any](v T) *T { return &v }
