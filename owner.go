package custody

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

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
// [Owner.Close] ends its custody of every child it holds.
type Owner struct {
	// Ledger records each child; nil opens the default ledger (see [ledger.Resolve]).
	Ledger *ledger.Ledger
	// Install is the install id for rows and tags; empty derives it from the executable's
	// directory (see [tag.Install]).
	Install string
	// TagEnv names the spawn tag variable; empty means [tag.EnvName]("").
	TagEnv string
	// Supervisor covers children on Unix; nil starts one that re-executes this binary (which
	// must call [Init] first thing in main), and [Owner.Close] closes it. One set here is the
	// caller's to close. Unused on Windows, where the job handle covers.
	// A supervisor that dies is replaced; set the client's Notify to hear of each loss of
	// coverage and its end, or poll its Err (see [supervise.Client]).
	Supervisor *supervise.Client
	// Stop is how [Owner.Close] stops the children still running; the zero value uses the
	// defaults.
	Stop StopOptions
	// Caller, when set, is the process this owner serves, whose end the program takes as its own
	// (custody run's --owner): each row the owner writes, a receipt included, records it
	// (caller_pid, caller_start_ticks). It changes nothing else; watching it is the program's.
	Caller *procid.ID

	once    sync.Once
	initErr error
	self    procid.Incarnation
	outer   []*supervise.Outer // every outer owner's supervisor, nearest first, for a nested owner on the process-group path
	ownSup  bool               // init made the Supervisor: it is the owner's to close
	unidle  func()             // ends the Supervisor's telling of its idle release (see idle)

	mu           sync.Mutex
	inited       bool                // a Start or an Adopt was admitted
	closed       bool                // Close was called: no Start or Adopt is admitted
	children     map[*Child]struct{} // started or adopted; removed when released or handed over
	ops          sync.WaitGroup      // Starts, Adopts and the reservation's making under way
	reserved     *scope.Reservation  // the next cgroup child's cgroup, made ahead (see reserve.go)
	reserving    bool                // the reservation is being made
	cgroupStarts int                 // starts whose child got a cgroup

	closeOnce sync.Once
	closeErr  error
}

// DefaultPurpose is the purpose of a child started or registered without one, by the API and
// by every verb of the command line alike. A purpose says what the child is for; "helper" says
// only that it helps its owner, which is all custody knows ("run" would say how it was started).
// It is none of the purposes reap takes as reapable without a reapable field.
const DefaultPurpose = "helper"

// StartOptions describes one child.
type StartOptions struct {
	// Purpose is what the child is for (serve, gateway, mcp-helper, …); empty means
	// [DefaultPurpose].
	Purpose string
	// Keep makes the row not reapable: reap never stops it, even after the owner crashed.
	Keep bool
	// Generation, when non-nil, is recorded in the row (see [Slot]).
	Generation *int
	// SharedConsole is for an interactive child the user drives from the console: on Windows it
	// stays in the owner's console process group and takes Ctrl+C (see
	// [scope.PrepareSharedConsole]); elsewhere it changes nothing.
	SharedConsole bool
	// GrantEnv, when set, mints a grant for the child (see [Child.Grant]) and hands it to the
	// child in this environment variable, so that the child can pass itself on to another owner;
	// [Child.EnvGrant] returns it. Empty mints nothing.
	GrantEnv string
	// GrantTTL is the GrantEnv grant's lifetime; 0 means [DefaultGrantTTL].
	GrantTTL time.Duration
}

func (o *Owner) init() error {
	o.once.Do(func() {
		// On an OS where no process can be identified (the BSDs), say so, rather than fail later
		// at the first read of some process.
		if o.initErr = procid.Supported(); o.initErr != nil {
			return
		}
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
			o.ownSup = true
		}
		o.unidle = o.Supervisor.OnIdle(o.idle)
		o.outer = outersFromEnv()
		o.self, o.initErr = procid.Self()
	})
	return o.initErr
}

// Start starts cmd as an owned child: in a scope of its own taken at spawn, stamped with the
// spawn tag, covered against the owner's death, recorded in the ledger, with its spawn-time handle
// retained. Every failure returns an error and leaves nothing behind: a failure before the child
// starts leaves it unstarted (a ledger lock that cannot be had within the ledger's LockTimeout is
// one: the error satisfies [ledger.IsLocked], and the child never ran); a failure after it started
// kills its scope and reaps it before Start returns, so no unowned child is left.
//
// ctx bounds Start itself (the wait for the ledger lock and the write of the row), not the
// child: unlike [exec.CommandContext], its end kills nothing once Start has returned. Stop the
// child with [Child.Stop].
//
// Start takes cmd over: the Child speaks for it from then on. Its reaper calls cmd.Wait, so the
// caller must not (a second Wait is refused by os/exec, and one that raced the reaper's could
// take the exit status from it); [Child.Wait] returns what cmd.Wait did. Nor should the caller
// use cmd.Process: [Child.Signal] and [Child.Stop] act on the whole scope with proven authority,
// and [Child.ID] names the child. After [Owner.Close], Start returns an error wrapping
// [ErrClosed].
func (o *Owner) Start(ctx context.Context, cmd *exec.Cmd, opts StartOptions) (*Child, error) {
	if err := o.begin(); err != nil {
		return nil, fmt.Errorf("custody: start: %w", err)
	}
	defer o.ops.Done()
	c, err := o.start(ctx, cmd, opts)
	if err != nil {
		return nil, fmt.Errorf("custody: start %s: %w", cmd.Path, err)
	}
	return c, nil
}

// start is Start once admitted. Everything it takes is undone in one place, its deferred unwind,
// unless started says that the child was started, covered and recorded: as os/exec's Cmd.Start
// does, so that no failure point has a list of its own to forget an undo in (one forgotten would
// leave a covered cgroup with no child, or a child nobody covers).
func (o *Owner) start(ctx context.Context, cmd *exec.Cmd, opts StartOptions) (_ *Child, err error) {
	purpose := opts.Purpose
	if purpose == "" {
		purpose = DefaultPurpose
	}
	t := tag.Tag{Install: o.Install, Purpose: purpose, SpawnerPID: o.self.PID, SpawnerCreate: &o.self.CreateTime}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, o.TagEnv+"="+t.String())
	stampScopeID(cmd)
	var (
		started bool            // the child is the caller's: nothing below is undone
		grant   *Grant          // the grant StartOptions.GrantEnv handed the child, or nil
		w       *pendingRow     // the ledger write, from the lock on
		prep    *scope.Prepared // the child's scope, before and during the start
		early   scope.Desc      // what of the scope was covered before the child existed
		g       *gate           // the process-group child's gate, or nil
		c       *Child          // the child, once cmd.Start has started it
	)
	defer func() {
		g.close() // a gate never opened ends its child without running the program
		if !started {
			if c != nil {
				c.abort() // kills its scope, reaps it, uncovers and closes the scope
			}
			prep.Abandon() // does nothing once Attach ran: a failed Attach abandoned it
			o.Supervisor.Uncover(early)
			w.abort()
		}
		grant.bindStart(c, started)
		if c != nil {
			if started {
				o.track(c) // before its reaper may release it
			}
			c.ok = started
			close(c.adopted)
		}
	}()
	if grant, err = o.grantEnv(cmd, opts); err != nil {
		return nil, err
	}
	// The supervisor is started before the ledger lock is taken: its first start execs a process,
	// which is no wait to impose on the ledger's other writers.
	if err := o.warm(); err != nil {
		return nil, err
	}
	// The ledger lock is taken before the child starts, so that a stalled holder fails the start
	// while the child has not run. The rest of the write (read, prune, the temporary file made and
	// the kept rows written into it) is ready before the child runs, so that recording the row
	// once it runs costs one short write and the rename. It is usually ready already: the owner's
	// ledger handle wrote it ahead after its last write (see ledger.Txn.TryPrepared), and the start
	// only links it, here. Otherwise it reads and writes, in a goroutine beside the child's exec.
	// The link is not left to that goroutine too: on two processors the thread woken for it, and
	// its system calls beside the exec, cost the start 20–40 µs more than the link itself.
	tx, err := o.Ledger.LockAppend(ctx)
	if err != nil {
		return nil, err
	}
	w = &pendingRow{tx: tx, done: make(chan struct{})}
	if tx.TryPrepared() {
		close(w.done)
	} else {
		go w.prepare()
	}
	reserved := o.takeReserved()
	prep, err = scope.PrepareReserved(cmd, reserved, opts.SharedConsole)
	o.dropReserved(reserved) // when not taken: made before this process was told to give process groups
	if err != nil {
		return nil, err
	}
	// A cgroup is covered before the child exists: from its first instruction, the owner's death
	// reaches it and everything it starts. A process group is covered only once it exists: the
	// child waits at a gate until then.
	early = prep.Desc()
	bornCovered, err := o.coverEarly(early)
	if err != nil {
		return nil, err
	}
	o.stampOuter(cmd, bornCovered)
	path := cmd.Path
	if !bornCovered {
		if g, err = newGate(cmd); err != nil {
			return nil, err
		}
		if g != nil {
			prep.Gated() // held until covered: it cannot have left its group by Attach
		}
	}
	// The child's start is read from the clock around its fork rather than from /proc after it,
	// where it can be (in a cgroup, or gated: see procid.Span and scope.Prepared.AttachWithin): a read of
	// /proc/PID/stat costs the start 15 µs here, two readings of the clock 1 µs.
	born := procid.BeginSpan()
	err = cmd.Start()
	born.End()
	cmd.Path = path // the gate's executable was the means, not the command
	g.started()
	if err != nil {
		return nil, err
	}
	c = &Child{cmd: cmd, owner: o, done: make(chan struct{}), adopted: make(chan struct{})}
	if err := o.finish(c, prep, w, g, born, bornCovered, purpose, opts); err != nil {
		return nil, err
	}
	started = true
	if bornCovered {
		o.reserveNext()
	}
	return c, nil
}

// finish takes custody of c's started child: its scope, its coverage, its handle and its row.
// bornCovered says that the child was born in a scope covered already; g, when not nil, is the
// child's gate, opened once the child is covered; born brackets the child's fork. On error, start
// undoes what it did (see start).
func (o *Owner) finish(c *Child, prep *scope.Prepared, w *pendingRow, g *gate, born procid.Span, bornCovered bool, purpose string, opts StartOptions) error {
	var err error
	if c.scope, err = prep.AttachWithin(born); c.scope != nil {
		c.covered = bornCovered
	}
	if err = faultAt("attach", err); err != nil {
		return err
	}
	c.ID = c.scope.Leader()
	c.proc, err = authority.FromChild(c.cmd.Process, c.ID)
	if err = faultAt("handle", err); err != nil {
		return err
	}
	if c.ID.Start == 0 {
		c.gone(w)
		return nil
	}
	if err = faultAt("cover", o.cover(c.scope, c.scopeID())); err != nil {
		return err
	}
	c.covered = true
	if err = o.coverOuter(c.scope); err != nil {
		return err
	}
	if err = g.open(); err != nil {
		return fmt.Errorf("open gate: %w", err)
	}
	if err = faultAt("record", nil); err != nil {
		return err
	}
	if err = c.record(w, purpose, opts); err != nil {
		return err
	}
	// The reaper starts last: until then nothing waits for the child, whose PID its zombie would
	// keep, and a failure reaps it in abort. Started after the append's background goroutine, it
	// finds a thread awake to run it, where before it woke one (some 4 µs of the start here).
	c.waiting = true
	go c.waitLeader()
	return nil
}

// startFault, set by tests only (export_test.go), fails a start at the named step after its
// child started: the steps whose failures the OS cannot be made to produce on demand.
var startFault func(step string) error

func faultAt(step string, err error) error {
	if err == nil && startFault != nil {
		return startFault(step)
	}
	return err
}

// gone handles a child that exited before its scope could read its start. With no proven
// identity it is neither covered nor recorded: a registration or a row naming its PID alone would
// come to name whatever process reuses the PID (a supervisor restarted later would be told to
// cover a stranger's group). What it left in its process group is killed now, while its unreaped
// zombie still pins the group's id, since nothing could cover it against the owner's death.
func (c *Child) gone(w *pendingRow) {
	c.scope.Signal(os.Kill) // ErrGone: it left nothing
	w.abort()
	c.waiting = true
	go c.waitLeader()
}

// pendingRow is the ledger write a start prepares while it makes the scope and the child execs.
type pendingRow struct {
	tx   *ledger.Txn
	done chan struct{} // closed once the write is prepared, or its preparation failed
	err  error
}

func (w *pendingRow) prepare() {
	w.err = w.tx.PrepareAppend()
	close(w.done)
}

// wait waits for the preparation and returns its error.
func (w *pendingRow) wait() error {
	<-w.done
	return w.err
}

// abort ends the write without writing, once its preparation is over. It does nothing after the
// row was appended.
func (w *pendingRow) abort() {
	if w == nil {
		return // the ledger lock was never had
	}
	<-w.done
	w.tx.Abort()
}

// record commits the child's ledger row in the prepared write.
func (c *Child) record(w *pendingRow, purpose string, opts StartOptions) error {
	if err := w.wait(); err != nil {
		return err
	}
	// What the scope read at spawn, pidfs id included (from the pidfd Go took then, see
	// scope.Prepared.Attach), is the row's: the child is not read again. The reaper runs already, and an
	// exited child's PID may name a stranger by now.
	inc, err := procid.Of(c.ID)
	if err != nil {
		return err
	}
	o := c.owner
	row := ledger.NewChildRow(inc, o.self, c.cmd.Args)
	row.Purpose, row.Install = purpose, o.Install
	row.SetScope(c.scope.Desc())
	row.ScopeID = c.scopeID()
	if row.Cgroup != "" {
		row.CgroupVia = scope.CgroupVia() // how the cgroup was had: a unit systemd delegated, or ""
	}
	row.Reapable = ptr(!opts.Keep)
	row.Generation = opts.Generation
	row.Owner = ptr(o.self.PID)
	if o.Caller != nil {
		row.CallerPID, row.CallerStartTicks = ptr(o.Caller.PID), ptr(o.Caller.Start)
	}
	if _, err := w.tx.Append(row); err != nil {
		return err
	}
	c.row = row
	return nil
}

func ptr[T any](v T) *T { return &v }
