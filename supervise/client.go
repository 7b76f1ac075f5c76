package supervise

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/custody-dev/custody/internal/sockdir"
	"github.com/custody-dev/custody/stop"
)

const (
	// DefaultIdleGrace is how long a [Client] keeps a supervisor that covers nothing.
	DefaultIdleGrace = 5 * time.Second
	// DefaultStartTimeout is how long a [Client] waits for a new supervisor to be ready.
	DefaultStartTimeout = 5 * time.Second
	// youngAge is the age under which a supervisor's death counts as dying young: each young
	// death in a row doubles the wait before the next restart, from restartMin up to restartMax,
	// so that a supervisor that cannot run is retried at a bounded rate, never in a tight loop.
	youngAge   = time.Second
	restartMin = 100 * time.Millisecond
	restartMax = 5 * time.Second
)

// UnknownStart as [Group.Start] says the leader's start is not known. The protocol accepts it
// from other programs (the supervisor then binds the group to whichever process leads it when
// the registration arrives), but a [Client] refuses it: it replays its set to every new
// supervisor, and a replayed registration without an identity would bind to whatever process
// holds the PID by then.
const UnknownStart = 0

// Group names a process group to cover, by its leader.
type Group struct {
	// PID is the leader's PID; 0 stands for PGID. A group is named by its leader, so a non-zero
	// PID other than PGID is refused.
	PID int
	// PGID is the process group.
	PGID int
	// Start is the leader's start in the OS-native unit of package procid (procid.ID.Start:
	// Linux start ticks, macOS microseconds since the epoch); [UnknownStart] is refused.
	Start uint64
	// PidfdID is the leader's pidfs id (procid.ID.PidfdID, Linux 6.9+), or 0 when not known.
	// With it the supervisor tells the leader from a process that took its PID within the tick
	// the leader started in. It travels as an optional fifth field of the register line, which a
	// supervisor that knows only the four-field line (or a Hermes one, which knows only two)
	// ignores whole: custody owners send it only to custody supervisors.
	PidfdID uint64
	// ScopeID is the scope's id in its processes' environment (scope.EnvScopeID), or "": at the
	// owner's death the supervisor also stops the processes of its user that carry it. It
	// travels on an "envid <pgid> <id>" line after the register line, which a Hermes supervisor
	// ignores.
	ScopeID string
}

var (
	// ErrClosed is returned by a [Client] used after [Client.Close].
	ErrClosed = errors.New("supervise: client closed")
	// ErrRefused reports a group that must never be covered: an id ≤ 1, a PID that is not the
	// group's leader, the owner's own group, or a leader whose start is not known.
	ErrRefused = errors.New("supervise: refused target")
	// ErrNoInit reports that the program's main did not call custody.Init (or [Init]) first, so
	// the supervisor, which is this binary re-executed, cannot be started: the copy would run main
	// again. A copy started as a supervisor that skipped Init reports it too, and starts no
	// supervisor of its own: the next copy would do the same, without end.
	ErrNoInit = errors.New("supervise: main did not call custody.Init first; the supervisor is this program re-executed, which would run main again")
)

// Client is an owner's side of the supervisor: it starts the supervisor process at the first
// registration, writes the protocol, keeps the covered set, and
//   - reaps the supervisor (no zombie) and, if it dies while groups are covered, reports the loss
//     (Notify, Logger, [Client.Err]), starts a new one and replays the whole set; after a death
//     within a second of its start the restart waits, 100 ms doubling up to 5 s for each such
//     death in a row, and is retried at that pace until a supervisor runs again;
//   - releases a supervisor that has covered nothing for IdleGrace, and starts one again at the
//     next registration.
//
// The supervisor is a separate process in its own session (setsid), so the terminal's signals
// and the owner's process group never reach it. Its standard input is a pipe whose write end only
// the owner holds, close-on-exec so that no other child inherits it; its standard output is
// /dev/null. By default the owner re-executes its own binary with $EnvSupervisor=1, and [Init] at
// the top of main turns that copy into the supervisor; [Client.Command] names another program.
//
// Set the fields before the first call; the zero Client is ready to use. Methods are safe for
// concurrent use. Unix only: on Windows every method returns an error wrapping
// [errors.ErrUnsupported].
type Client struct {
	// Grace is the supervisor's [Config.Grace]: how long covered groups have between SIGTERM and
	// SIGKILL when the owner dies. 0 means [stop.DefaultGrace].
	Grace time.Duration
	// IdleGrace is how long a supervisor covering nothing is kept before it is released (its
	// pipe closed: it exits at once, killing nothing). 0 means [DefaultIdleGrace]; negative
	// keeps it until Close.
	IdleGrace time.Duration
	// StartTimeout bounds the wait for a new supervisor to signal readiness. 0 means
	// [DefaultStartTimeout].
	StartTimeout time.Duration
	// Command, when set, is the supervisor program and its leading arguments, for example
	// {"custody", "supervise"}: Command[0] is looked up in PATH from the owner's working
	// directory, and "--owner-pgid P --grace D" are appended. The program must serve the
	// protocol on its standard input and honour $EnvReadyFD, as [Run] does, including the
	// register line's fifth field (see [Group.PidfdID]). Nil re-executes the running binary,
	// which must call [Init] first thing in main.
	Command []string
	// Stderr is the supervisor's standard error, where it logs refusals and signal failures.
	// Nil inherits the owner's os.Stderr. The supervisor outlives a dead owner by up to Grace,
	// and keeps the file open that long: a parent reading the owner's stderr to EOF waits for it.
	Stderr *os.File
	// Logger receives the client's own events: supervisor deaths, restarts, failures. Nil
	// discards.
	Logger *slog.Logger
	// Notify, when set, is told of every change of coverage, in order and never under the
	// client's lock: with an error each time the covered set loses its supervisor (the groups
	// are not covered until a new one runs), and with nil each time a new supervisor covers the
	// set again. custody run prints them.
	Notify func(lost error)

	mu      sync.Mutex
	groups  map[int]Group   // the covered set, replayed to every new supervisor
	cgroups map[string]bool // covered cgroups, replayed likewise
	// reserved holds the cgroups covered ahead of their child (see reserveCgroup), each with the
	// supervisor told: they are not replayed, and one told to a supervisor no longer current is
	// not covered.
	reserved map[string]*proc
	sup      *proc       // the current supervisor, nil when none runs
	idle     *time.Timer // the pending release of an idle supervisor
	idleGen  int         // invalidates an idle timer that fired while the set changed
	idleNow  bool        // release as soon as idle, not after IdleGrace (see ReleaseWhenIdle)
	young    int         // consecutive supervisor deaths within youngAge of their start
	retry    *time.Timer // the pending restart after a loss
	err      error       // the loss in progress: the covered set is not covered; nil once it is
	closed   bool
	nestDir  string         // the directory of the supervisors' nest socket, made once
	nestLock *sockdir.Lock  // the owner's lock on nestDir (see nestlock_posix.go), nil when none is held
	buf      []byte         // replay scratch
	waiters  sync.WaitGroup // one per supervisor not yet reaped

	notes     []error        // changes of coverage not yet given to Notify
	notifying bool           // a goroutine is giving them
	onIdle    map[int]func() // told of each idle release (see OnIdle), by registration
	idleHooks int            // registrations so far
}

// proc is one supervisor process.
type proc struct {
	cmd     *exec.Cmd
	w       *os.File // write end of its standard input; the owner's only copy
	started time.Time
	give    func() // returns its death word once it has exited (Linux); may be nil
	nest    string // the directory of its nest socket; "" when it has none
	unready error  // why it was killed before it said it was ready (see awaitReadyLater); guarded by the Client's mu
}

// Start starts the supervisor now rather than at the first [Client.Register], to take the start
// out of the window between spawning a child and covering it. A supervisor started for nothing is
// released after IdleGrace like any idle one.
//
// Start, and a registration that starts a supervisor, return once the supervisor is ready to read
// its pipe on the process-group path (a nest socket must listen first) and with a Command; the
// built-in supervisor on the cgroup path is only started, its readiness awaited in the
// background: lines written meanwhile wait in the pipe and are read even if the owner dies before
// the supervisor runs. One not ready within StartTimeout is then a loss, told to Notify.
func (c *Client) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	if c.sup != nil {
		return nil
	}
	if err := c.startLocked(); err != nil {
		return fmt.Errorf("supervise: %w", err)
	}
	if c.emptyLocked() {
		c.endLossLocked()
		c.armIdleLocked()
	}
	return nil
}

// register covers a group (see [Client.Cover]): when the owner dies, the supervisor stops it (see [Serve]). It returns
// once the registration is in the supervisor's pipe, starting the supervisor first if none runs;
// from then on the owner's death, at any instant, reaches the group. Registering a covered group
// again replaces its record.
//
// Spawn the child in its own process group (SysProcAttr.Setpgid) and register it right away;
// stop it before [Client.Uncover], not after, or an owner death in between orphans it.
func (c *Client) register(g Group) error {
	if g.PID == 0 {
		g.PID = g.PGID
	}
	if g.PGID <= 1 || g.PID != g.PGID {
		return fmt.Errorf("supervise: register pid %d pgid %d: %w", g.PID, g.PGID, ErrRefused)
	}
	if own := ownGroup(); g.PGID == own {
		return fmt.Errorf("supervise: register %d: the owner's own group: %w", g.PGID, ErrRefused)
	}
	if g.Start == UnknownStart {
		return fmt.Errorf("supervise: register %d: the leader's start is not known: %w", g.PGID, ErrRefused)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	c.stopIdleLocked()
	if c.groups == nil {
		c.groups = make(map[int]Group)
	}
	old, had := c.groups[g.PGID]
	c.groups[g.PGID] = g
	if err := c.sendLocked(registerLine(nil, g)); err != nil {
		if had {
			c.groups[g.PGID] = old
		} else {
			delete(c.groups, g.PGID)
		}
		if c.emptyLocked() {
			c.armIdleLocked()
		}
		return fmt.Errorf("supervise: register %d: %w", g.PGID, err)
	}
	return nil
}

// registerCgroup covers a cgroup scope custody made (path as in scope.Desc.Cgroup): when the
// owner dies, the supervisor stops everything in it, ending with cgroup.kill, and removes it (see
// the package doc). Register it right after making it and before starting the child in it: the
// child is then covered from its first instruction. It returns once the line is in the
// supervisor's pipe. The supervisor opens the cgroup on reading the line; one it cannot open is
// logged and ignored there.
func (c *Client) registerCgroup(path string) error {
	if err := refuseCgroup("register", path); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	c.stopIdleLocked()
	if c.cgroups == nil {
		c.cgroups = make(map[string]bool)
	}
	if p, ok := c.reserved[path]; ok {
		delete(c.reserved, path)
		if p == c.sup { // the running supervisor has it: nothing to write
			c.cgroups[path] = true
			return nil
		}
	}
	if c.cgroups[path] {
		return nil // covered already (before its child was born): nothing to write
	}
	c.cgroups[path] = true
	if err := c.sendLocked(cgroupLine(nil, "cgroup", path)); err != nil {
		delete(c.cgroups, path)
		if c.emptyLocked() {
			c.armIdleLocked()
		}
		return fmt.Errorf("supervise: register cgroup %s: %w", path, err)
	}
	return nil
}

// reserveCgroup covers an empty cgroup made ahead of the child that will be born in it (see
// scope.Reserve), so that registerCgroup at the child's start finds it covered and
// writes nothing: the supervisor opens a cgroup on reading its line, work that would otherwise
// run beside the child's exec. A reservation keeps no supervisor: with none running it covers
// nothing (and returns nil), and a client that covers only reservations is idle, released after
// IdleGrace once it has uncovered them, so that the supervisor leaves them in place. A supervisor
// that dies takes its reservations with it: they are not replayed to the next, and
// registerCgroup then covers the cgroup as if never reserved. The owner's death removes the
// reserved cgroups, as it does every covered cgroup once empty.
func (c *Client) reserveCgroup(path string) error {
	if err := refuseCgroup("reserve", path); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	p := c.sup
	if p == nil || c.cgroups[path] {
		return nil
	}
	if err := c.sendLocked(cgroupLine(nil, "cgroup", path)); err != nil {
		return fmt.Errorf("supervise: reserve cgroup %s: %w", path, err)
	}
	if c.sup == p { // not replaced meanwhile: p read the line
		if c.reserved == nil {
			c.reserved = make(map[string]*proc)
		}
		c.reserved[path] = p
	}
	return nil
}

// refuseCgroup refuses a path that is not a custody cgroup's, or whose line (the longer
// "uncgroup" one included) would not fit the protocol.
func refuseCgroup(op, path string) error {
	if !validCgroup(path) || len(path)+len("uncgroup \n") > MaxLine {
		return fmt.Errorf("supervise: %s cgroup %q: %w", op, path, ErrRefused)
	}
	return nil
}

// unregisterCgroup stops covering a cgroup; its processes are left alone. Unregistering a cgroup
// that is not covered does nothing.
func (c *Client) unregisterCgroup(path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if p, ok := c.reserved[path]; ok {
		delete(c.reserved, path)
		if p == c.sup {
			if err := c.sendLocked(cgroupLine(nil, "uncgroup", path)); err != nil {
				return fmt.Errorf("supervise: unregister cgroup %s: %w", path, err)
			}
		}
		return nil
	}
	if !c.cgroups[path] {
		return nil
	}
	delete(c.cgroups, path)
	if c.sup != nil {
		if err := c.sendLocked(cgroupLine(nil, "uncgroup", path)); err != nil {
			return fmt.Errorf("supervise: unregister cgroup %s: %w", path, err)
		}
	}
	if c.emptyLocked() {
		c.endLossLocked()
		c.armIdleLocked()
	}
	return nil
}

// emptyLocked reports whether nothing is covered.
func (c *Client) emptyLocked() bool { return c.coveredLocked() == 0 }

func (c *Client) coveredLocked() int { return len(c.groups) + len(c.cgroups) }

// endLossLocked ends a loss in progress because nothing is left to cover.
func (c *Client) endLossLocked() {
	c.err = nil
	c.stopRetryLocked()
}

// unregister stops covering a group; the owner's death no longer reaches it. Unregistering a
// group that is not covered does nothing. When the set becomes empty, the supervisor is released
// after IdleGrace.
func (c *Client) unregister(pgid int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if _, ok := c.groups[pgid]; !ok {
		return nil
	}
	delete(c.groups, pgid)
	if c.sup != nil {
		if err := c.sendLocked(unregisterLine(nil, pgid)); err != nil {
			return fmt.Errorf("supervise: unregister %d: %w", pgid, err)
		}
	}
	if c.emptyLocked() {
		c.endLossLocked()
		c.armIdleLocked()
	}
	return nil
}

// Close releases the supervisor and waits for it to exit. Closing the pipe is exactly what the
// owner's death does: groups still registered are stopped (SIGTERM, then SIGKILL after Grace)
// and Close waits that long; with everything unregistered the supervisor exits at once and kills
// nothing. Close is idempotent; the Client is unusable afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.stopIdleLocked()
		c.stopRetryLocked()
		c.releaseLocked()
	}
	c.mu.Unlock()
	c.waiters.Wait()
	c.removeNest()
	c.mu.Lock()
	c.nestLock.Release() // after the removal: until then a sweeper must leave the directory alone
	c.nestLock = nil
	c.mu.Unlock()
	return nil
}

// ReleaseIdle releases the supervisor now if it covers nothing, as the end of IdleGrace would
// (the OnIdle hooks are told), and returns without waiting for it to exit: an owner that knows
// it is done lets the supervisor's exit run beside its own last work, and its Close then waits
// for an exit already under way (see also [Client.ReleaseWhenIdle]). A supervisor
// that covers something, or none, is left as it is; a later cover starts one again.
func (c *Client) ReleaseIdle() {
	c.mu.Lock()
	idle := !c.closed && c.emptyLocked()
	if idle {
		c.stopIdleLocked()
	}
	tell := c.releaseIdleLocked(idle)
	c.mu.Unlock()
	tell()
}

// ReleaseWhenIdle is [Client.ReleaseIdle] from now on: the supervisor is released as soon as it
// covers nothing (at once if it covers nothing now), rather than after IdleGrace. An owner that
// will cover nothing new (custody run, once its child has exited) lets the supervisor's exit run
// beside the rest of its end: the scope's removal, the ledger's write, the orphans' pass. The
// release runs in a goroutine of its own, so that the uncover that leaves the set empty returns
// without waiting for it.
func (c *Client) ReleaseWhenIdle() {
	c.mu.Lock()
	c.idleNow = true // an uncover from now on arms the release with no grace (see armIdleLocked)
	c.mu.Unlock()
	c.ReleaseIdle()
}

// releaseIdleLocked releases the supervisor when idle says it covers nothing and one runs, and
// returns what tells the OnIdle hooks of it, for the caller to call once it has released the
// lock.
func (c *Client) releaseIdleLocked(idle bool) func() {
	released := idle && c.sup != nil
	if released {
		c.unreserveLocked()
		c.releaseLocked()
	}
	return c.tellIdleLocked(released)
}

// PID returns the running supervisor's PID, or 0 when none runs. It is observation (for tests,
// benchmarks and diagnostics); the Client signals the supervisor only through its own handle.
func (c *Client) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sup == nil {
		return 0
	}
	return c.sup.cmd.Process.Pid
}

// Err reports why the covered set is not covered now (its supervisor died and no new one runs
// yet), or nil.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Covered returns how many groups and cgroups are covered: registered and not unregistered.
func (c *Client) Covered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coveredLocked()
}

func (c *Client) usableLocked() error {
	if c.closed {
		return ErrClosed
	}
	return nil
}

// sendLocked writes a line to the supervisor. With none running it starts one, which replays the
// whole set (the set already holds the change); a supervisor that can no longer read is replaced.
func (c *Client) sendLocked(line []byte) error {
	if p := c.sup; p != nil {
		_, err := p.w.Write(line)
		if err == nil {
			return nil
		}
		return c.lostLocked(p, err)
	}
	if c.emptyLocked() {
		return nil
	}
	return c.startLocked()
}

// startLocked starts a supervisor and replays the covered set to it.
func (c *Client) startLocked() error {
	p, err := c.spawn()
	if err != nil {
		return err
	}
	c.sup = p
	c.waiters.Add(1)
	go c.wait(p)
	buf := c.buf[:0]
	for _, g := range c.groups {
		buf = registerLine(buf, g)
	}
	for path := range c.cgroups {
		buf = cgroupLine(buf, "cgroup", path)
	}
	c.buf = buf[:0]
	if len(buf) > 0 {
		if _, err := p.w.Write(buf); err != nil {
			return c.lostLocked(p, err)
		}
	}
	if c.err != nil && !c.emptyLocked() {
		c.restoredLocked()
	}
	return nil
}

// wait reaps a supervisor. The current one dying is a loss: it is replaced when groups are
// covered. A released or replaced one exiting is expected.
func (c *Client) wait(p *proc) {
	defer c.waiters.Done()
	err := p.cmd.Wait()
	if p.give != nil {
		p.give()
	}
	c.mu.Lock()
	if c.sup != p {
		// Released, or lost and replaced. A released one that was killed before it could
		// remove its nest directory leaves it to us; a replacement listens in a lost one's.
		theirs := p.nest != "" && p.nest != c.nestDir
		c.mu.Unlock()
		if theirs {
			removeNestDir(p.nest)
		}
		if err != nil {
			c.logger().Debug("supervise: released supervisor exited", "pid", p.cmd.Process.Pid, "err", err)
		}
		return
	}
	if p.unready != nil {
		err = p.unready
	} else if err == nil {
		err = errors.New("exited")
	}
	c.lostLocked(p, err)
	// Lost while it covered nothing: no new one is started, and the owner is as after an idle
	// release, with nobody to remove at its death what it holds for later.
	tell := c.tellIdleLocked(c.sup == nil && c.emptyLocked() && !c.closed)
	c.mu.Unlock()
	tell()
}

// lostLocked handles the loss of the current supervisor p, seen by its waiter or by a failed
// write: it kills what may be left of it (we still hold its handle, so the signal reaches that
// process and no other) and, when groups are covered, reports the loss and starts a new one,
// which replays the set: at once after a supervisor that lived, after a wait (see restartMin)
// after one that died young. It returns nil when the set is covered again, else the loss.
func (c *Client) lostLocked(p *proc, why error) error {
	c.sup = nil
	p.w.Close()
	p.cmd.Process.Kill() // the waiter reaps it
	if c.emptyLocked() || c.closed {
		return nil
	}
	if time.Since(p.started) < youngAge {
		c.young++
	} else {
		c.young = 0
	}
	loss := fmt.Errorf("supervise: supervisor pid %d lost (%w): %d covered scopes are not covered until a new one runs",
		p.cmd.Process.Pid, why, c.coveredLocked())
	c.logger().Warn("supervise: supervisor lost", "pid", p.cmd.Process.Pid, "err", why, "covered", c.coveredLocked())
	if c.err == nil {
		c.err = loss
		c.notifyLocked(loss)
	}
	if c.young == 0 {
		if err := c.startLocked(); err == nil {
			return nil
		} else if c.sup == nil {
			c.retryLocked(err)
		}
		return c.err
	}
	c.retryLocked(why)
	return c.err
}

// retryLocked schedules the next restart after a young death or a failed start: restartMin,
// doubled for each young death in a row, at most restartMax.
func (c *Client) retryLocked(why error) {
	if c.retry != nil {
		return
	}
	d := restartMax
	if c.young < 8 {
		d = min(restartMin<<max(c.young-1, 0), restartMax)
	}
	c.logger().Info("supervise: restart supervisor", "in", d, "after", why)
	c.retry = time.AfterFunc(d, c.restart)
}

// restart is the retry timer's: it starts a supervisor if the covered set still has none.
func (c *Client) restart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retry = nil
	if c.sup != nil || c.closed || c.emptyLocked() {
		return
	}
	if err := c.startLocked(); err != nil && c.sup == nil {
		c.young++
		c.retryLocked(err)
	}
}

// restoredLocked ends a loss: a new supervisor covers the set.
func (c *Client) restoredLocked() {
	c.err = nil
	c.stopRetryLocked()
	c.logger().Info("supervise: supervisor restarted", "pid", c.sup.cmd.Process.Pid, "covered", c.coveredLocked())
	c.notifyLocked(nil)
}

func (c *Client) stopRetryLocked() {
	if c.retry != nil {
		c.retry.Stop()
		c.retry = nil
	}
}

// notifyLocked queues a change of coverage for Notify, which one goroutine calls, in order and
// without the lock: a Notify that calls back into the client (Err, Covered) must not deadlock.
func (c *Client) notifyLocked(lost error) {
	if c.Notify == nil {
		return
	}
	c.notes = append(c.notes, lost)
	if !c.notifying {
		c.notifying = true
		go c.deliver()
	}
}

func (c *Client) deliver() {
	for {
		c.mu.Lock()
		if len(c.notes) == 0 {
			c.notifying = false
			c.mu.Unlock()
			return
		}
		lost := c.notes[0]
		c.notes = c.notes[1:]
		c.mu.Unlock()
		c.Notify(lost)
	}
}

// armIdleLocked schedules the release of the current supervisor, which covers nothing.
func (c *Client) armIdleLocked() {
	c.stopIdleLocked()
	grace := c.IdleGrace
	switch {
	case c.idleNow:
		grace = 0
	case grace == 0:
		grace = DefaultIdleGrace
	}
	if c.sup == nil || c.closed || grace < 0 {
		return
	}
	gen := c.idleGen
	c.idle = time.AfterFunc(grace, func() {
		c.mu.Lock()
		tell := c.releaseIdleLocked(gen == c.idleGen && c.emptyLocked())
		c.mu.Unlock()
		tell()
	})
}

// tellIdleLocked returns what tells the OnIdle hooks, when idle, of the client left without a
// supervisor; the caller calls it once it has released the lock.
func (c *Client) tellIdleLocked(idle bool) func() {
	if !idle {
		return func() {}
	}
	hooks := slices.Collect(maps.Values(c.onIdle))
	return func() {
		for _, f := range hooks {
			f()
		}
	}
}

// OnIdle registers f, to be called, never under the client's lock, each time the client releases
// an idle supervisor and each time a supervisor that covered nothing dies. From then until the
// next registration no supervisor runs: whatever the owner holds for later (custody.Owner's spare
// cgroup, and its empty cgroup directory) would outlive the owner's death, with nobody left to
// remove it but a reap, so f should let it go. The returned stop unregisters f.
func (c *Client) OnIdle(f func()) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.onIdle == nil {
		c.onIdle = make(map[int]func())
	}
	c.idleHooks++
	id := c.idleHooks
	c.onIdle[id] = f
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.onIdle, id)
	}
}

func (c *Client) stopIdleLocked() {
	c.idleGen++
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
}

// unreserveLocked uncovers the reservations, before an idle supervisor is released: its EOF would
// otherwise remove their cgroups, which their owner still counts on.
func (c *Client) unreserveLocked() {
	for path, p := range c.reserved {
		if p == c.sup && p != nil {
			p.w.Write(cgroupLine(nil, "uncgroup", path)) // a failure is a supervisor gone: it removes nothing
		}
	}
	c.reserved = nil
}

// releaseLocked closes the current supervisor's pipe: it reads EOF, stops what it still covers,
// and exits; its waiter reaps it.
func (c *Client) releaseLocked() {
	if p := c.sup; p != nil {
		c.sup = nil
		p.w.Close()
		// It removes its nest socket and directory as it exits, which may be after the next
		// supervisor has started: that one must not listen there. A fresh directory costs
		// nothing: no child holds the old path, since a client is released only when it covers
		// nothing, or at Close. The old name is the exiting supervisor's alone, which holds its
		// own lock on it until it has removed it.
		c.nestDir = ""
		c.nestLock.Release()
		c.nestLock = nil
	}
}

func (c *Client) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c *Client) grace() time.Duration {
	return stop.Grace(c.Grace)
}

func (c *Client) startTimeout() time.Duration {
	if c.StartTimeout <= 0 {
		return DefaultStartTimeout
	}
	return c.StartTimeout
}
