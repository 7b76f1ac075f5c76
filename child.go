package custody

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
)

// Child is an owned child process and its scope.
type Child struct {
	// ID is the child's incarnation, read at spawn.
	ID procid.ID

	cmd     *exec.Cmd // the command Owner.Start started, waited by reap alone; nil when adopted
	owner   *Owner
	scope   *scope.Scope
	proc    *authority.Process
	row     ledger.Row
	covered bool
	waiting bool // waitLeader runs: the leader is reaped by it, not by abort

	done    chan struct{} // closed when the leader has been reaped
	waitErr error
	adopted chan struct{} // closed when Start has returned; ok says whether it returned c
	ok      bool

	releaseMu  sync.Mutex // guards released, releaseErr, users and unused
	released   bool
	releaseErr error
	users      int           // Stops in progress: the handles Release would close are in use
	unused     chan struct{} // closed when users falls back to 0; nil while it is 0

	transfer childTransfer // what the transfer keeps of the child (see transfer.go)
}

// waitLeader waits for the leader, and reaps it: its exit status is kept for [Child.Wait], and the zombie does not
// linger. After it the PID may be recycled; the scope re-proves its identity from then on.
//
// Then, if the scope is empty, it releases the child: an owner that waits for its children and
// never calls Release would otherwise keep a registration, a ledger row and the supervisor's
// descriptor for every child it ever started. A scope with members left stays covered until
// [Child.Stop] or [Child.Release].
func (c *Child) waitLeader() {
	c.awaitExit()
	c.waitErr = c.cmd.Wait()
	close(c.done)
	// Those waiting for the exit (a Wait, an agent's exit event) run first: the release below
	// writes the ledger and removes the cgroup, a millisecond or more on a loaded machine, and the
	// goroutine woken by close would otherwise wait for this one's processor until then.
	runtime.Gosched()
	<-c.adopted // a failed start undoes its own work
	if c.ok {
		c.releaseIfEmpty()
	}
}

// releaseIfEmpty releases the child once its scope is empty, unless a Stop is using its handles: that
// Stop releases it when it ends.
func (c *Child) releaseIfEmpty() {
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	if c.users > 0 || c.released {
		return
	}
	if empty, err := c.scope.Empty(); err == nil && empty {
		c.releaseLocked()
	}
}

// Wait waits for the child (the scope's leader) to exit and returns what [exec.Cmd.Wait] did: nil
// for a zero exit status, an [*exec.ExitError] (with its ExitCode) otherwise. For an adopted child
// it returns nil, an [*ExitError] or an error wrapping [ErrExitUnknown] (see [Owner.Adopt]). It
// may be called any number of times, from any goroutine.
// Other members of its scope may still run: [Child.Stop] ends them. When none did, the child is
// released by itself soon after (see [Child.Release]).
func (c *Child) Wait() error {
	<-c.done
	return c.waitErr
}

// Done is closed when the child has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Signal sends sig to the child's whole scope: its process group on Unix; on Windows only
// os.Kill, which terminates the job. After the child was handed to another owner it refuses.
func (c *Child) Signal(sig os.Signal) error {
	if err := c.owned(); err != nil {
		return fmt.Errorf("custody: signal pid %d: %w", c.ID.PID, err)
	}
	return c.scope.Signal(sig)
}

// SignalGroup sends sig to the process group the child leads, the job a terminal stops and
// continues, proven as the scope proves it (see [scope.Scope.SignalGroup]): on the process-group
// path it is Signal; in a cgroup it reaches only the members that stayed in the child's group.
// On Windows it returns an error wrapping [errors.ErrUnsupported]. After the child was handed to
// another owner it refuses.
func (c *Child) SignalGroup(sig os.Signal) error {
	if err := c.owned(); err != nil {
		return fmt.Errorf("custody: signal the group of pid %d: %w", c.ID.PID, err)
	}
	return c.scope.SignalGroup(sig)
}

// owned reports, as an error, that the child was handed to another owner.
func (c *Child) owned() error {
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	return c.transfer.handedOver()
}

// Stop stops the child's scope through the authority retained from its spawn: SIGTERM to the
// scope, the grace, SIGKILL, and an outcome that reports only what was observed. When every
// member has exited, the child is released (see [Child.Release]); otherwise it stays covered.
// A child handed to another owner is not this owner's to stop: the outcome is no-authority.
func (c *Child) Stop(ctx context.Context, opts StopOptions) StopResult {
	if err := c.owned(); err != nil {
		return stop.Result{PID: c.ID.PID, Outcome: stop.NoAuthority, Reason: err.Error()}
	}
	if !c.use() { // released: it exited, and its scope was seen empty
		res := stop.Result{PID: c.ID.PID, Outcome: stop.AlreadyExited, Reason: "it had exited and been released before the stop"}
		// Released by itself after its exit, its row's drop may still wait for the owner's next
		// ledger write (ReleaseSoon). A Stop returns with the row gone, as when it releases the
		// child itself: a caller that then reads the ledger must not find the child there.
		if err := c.owner.Ledger.Flush(ctx); err != nil {
			res.Reason += ", but " + err.Error()
		}
		return res
	}
	sc, swept := c.stopScope()
	res := stop.Stop(ctx, stop.Target{PID: c.ID.PID, Process: c.proc, Scope: sc}, opts)
	swept()
	c.unuse()
	if res.OK() {
		<-c.done // the leader has exited; its reaper is about to finish
		if err := c.Release(ctx); err != nil && res.Reason == "" {
			res.Reason = "stopped, but " + err.Error()
		}
	}
	return res
}

// Release ends custody of a child whose scope is empty: the supervisor stops covering it, its
// ledger row is dropped and its handles are closed. It refuses while any member of the scope
// still runs, because an uncovered survivor would outlive the owner. A child whose exit left its
// scope empty is released by itself once reaped; Release then returns what that release did.
// While a [Child.Stop] of the child is under way, Release waits for it to end (or for ctx), then
// returns what the Stop's own release did.
func (c *Child) Release(ctx context.Context) error {
	if err := c.ReleaseSoon(ctx); err != nil {
		return err
	}
	if err := c.owner.Ledger.Flush(ctx); err != nil {
		return fmt.Errorf("custody: release pid %d: %w", c.ID.PID, err)
	}
	return nil
}

// ReleaseSoon is [Child.Release], but the drop of the child's ledger row is left to the owner's
// next write to the ledger (see [ledger.Ledger.DropSoon]): its next start's, which rewrites the
// ledger anyway, or one of its own within [ledger.DropDelay]; [Owner.Close] writes it before it
// returns. A program that starts and ends many children (an agent serving a client) spends one
// ledger write per child instead of two. Until the write, the row names an exited process, which
// every reader proves before acting on it. A child released by itself after its exit (see
// [Child.Wait]) is released so.
func (c *Child) ReleaseSoon(ctx context.Context) error {
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	// A Stop in progress signals and watches the scope through the handles a release closes: closed
	// under it, its next signal or wait fails, and it reports no-authority over a scope that in fact
	// exited. A release refused anyway is refused now, not after the Stop's grace.
	for c.users > 0 && !c.released {
		if err := c.releasable(); err != nil {
			return err
		}
		unused := c.unused
		c.releaseMu.Unlock()
		select {
		case <-unused:
		case <-ctx.Done():
			c.releaseMu.Lock()
			return fmt.Errorf("custody: release pid %d: waiting for its stop: %w", c.ID.PID, ctx.Err())
		}
		c.releaseMu.Lock()
	}
	return c.releaseLocked()
}

// errOccupied says why a child cannot be released yet: its leader or a member of its scope runs.
var errOccupied = errors.New("its scope is not empty")

func (c *Child) releaseLocked() error {
	if c.released {
		return c.releaseErr
	}
	if err := c.releasable(); err != nil {
		return err
	}
	c.released = true
	c.dropRow()
	err := errors.Join(c.owner.uncover(c.scope), c.proc.Close(), c.scope.Close())
	if err != nil {
		c.releaseErr = fmt.Errorf("custody: release pid %d: %w", c.ID.PID, err)
	}
	// Untracked only now: a Close meanwhile finds the child still held, and its Stop and Release
	// wait on releaseMu for this release to end, so that Close returns with no write of the
	// owner's still under way (the row's drop, the cgroup's removal).
	c.owner.untrack(c)
	return c.releaseErr
}

// releasable returns nil when the child's leader has exited and its scope is seen empty, else why
// it cannot be released yet.
func (c *Child) releasable() error {
	select {
	case <-c.done:
	default:
		return fmt.Errorf("custody: release pid %d: it is still running: %w", c.ID.PID, errOccupied)
	}
	if empty, err := c.scopeEmpty(); err != nil {
		// Emptiness that cannot be told is not proven: the scope counts as occupied.
		return fmt.Errorf("custody: release pid %d: %v: %w: %w", c.ID.PID, c.scope, errOccupied, err)
	} else if !empty {
		return fmt.Errorf("custody: release pid %d: %v: %w", c.ID.PID, c.scope, errOccupied)
	}
	return nil
}

// use marks the child's handles in use by a Stop, unless it was released; unuse ends that.
func (c *Child) use() bool {
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	if c.released {
		return false
	}
	if c.users == 0 {
		c.unused = make(chan struct{})
	}
	c.users++
	return true
}

func (c *Child) unuse() {
	c.releaseMu.Lock()
	c.users--
	if c.users == 0 {
		close(c.unused) // a Release waiting for the Stops may close the handles now
		c.unused = nil
	}
	c.releaseMu.Unlock()
}

// dropRow drops the child's row with the owner's next ledger write (see ledger.Ledger.DropSoon):
// the next start's, which rewrites the ledger anyway, or one of its own soon after. A burst of
// releases (an owner's Close, a scope of many children ending) is one write.
func (c *Child) dropRow() {
	if c.row.PID != 0 {
		c.owner.Ledger.DropSoon([]ledger.Row{c.row})
	}
}

// abort kills a child whose start failed part way, and undoes what was done.
func (c *Child) abort() {
	if c.scope != nil {
		c.scope.Signal(os.Kill)
	}
	c.cmd.Process.Kill()
	if c.waiting {
		<-c.done
	} else {
		c.cmd.Wait()
	}
	if c.proc != nil {
		c.proc.Close()
	}
	if c.covered {
		c.owner.uncover(c.scope)
	}
	if c.scope != nil {
		c.scope.Close()
	}
}
