package custody

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/custody-dev/custody/scope"
)

// ErrClosed is what [Owner.Start] and [Owner.Adopt] return, wrapped, after [Owner.Close].
var ErrClosed = errors.New("custody: owner closed")

// begin admits a Start or an Adopt, which calls o.ops.Done when it returns; after Close it
// refuses. Close waits for the admitted ones, so that none adds a child it would not stop.
func (o *Owner) begin() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	if err := o.init(); err != nil {
		return err
	}
	o.ops.Add(1)
	o.inited = true
	return nil
}

// track adds a child the owner now holds. The child cannot be released or handed over before:
// its reaper or watcher, and every grant, starts only after it is tracked.
func (o *Owner) track(c *Child) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.children == nil {
		o.children = make(map[*Child]struct{})
	}
	o.children[c] = struct{}{}
}

// untrack drops a child the owner no longer holds: released, handed over, or forsaken by Close.
// Callers hold c.releaseMu; the order is always c.releaseMu, then o.mu.
func (o *Owner) untrack(c *Child) {
	o.mu.Lock()
	delete(o.children, c)
	o.mu.Unlock()
}

// held returns the children the owner holds now.
func (o *Owner) held() []*Child {
	o.mu.Lock()
	defer o.mu.Unlock()
	cs := make([]*Child, 0, len(o.children))
	for c := range o.children {
		cs = append(cs, c)
	}
	return cs
}

// Close ends the owner's custody of everything it holds, as its death would but in order and
// with every failure reported. It waits for the Starts and Adopts under way to return; stops,
// all at once, every child the owner started or adopted and still holds, as [Child.Stop] does
// with the options in [Owner.Stop] (the request to exit, the grace, the kill), and releases each
// (its coverage and its ledger row); then closes the supervisor the owner started (and, for a
// nested owner, its connection to the outer owner's supervisor), and lets go of what the ledger
// handle keeps between writes. A child handed to another owner is that owner's:
// Close leaves it alone. Afterwards Start and Adopt return an error wrapping [ErrClosed].
//
// A child whose exit Close could not prove (its stop timed out or was refused) is named in the
// error, and custody of it ends as on the owner's death: its scope is closed (a cgroup is killed
// and removed; on Windows the job is closed, which kills what it holds) and the supervisor,
// closed, stops its process group after the supervisor's grace. Its ledger row stays, the claim
// by which a later reap can find it and prove its end.
//
// A supervisor the caller set in [Owner.Supervisor] is the caller's to close: Close unregisters
// from it every child it released, and leaves it running (a supervisor that covers nothing is
// released after its IdleGrace), still covering a child whose exit could not be proven.
//
// Close returns the first call's error to every call: it is idempotent, and safe to call while
// other goroutines use the owner and its children.
func (o *Owner) Close() error {
	o.closeOnce.Do(func() { o.closeErr = o.close() })
	return o.closeErr
}

func (o *Owner) close() error {
	o.mu.Lock()
	o.closed = true
	inited := o.inited
	o.mu.Unlock()
	o.ops.Wait()
	if !inited {
		return nil // nothing started: nothing to end
	}
	o.unidle()
	o.dropReserved(o.takeReserved())
	errs := o.stopAll()
	for _, c := range o.held() {
		errs = append(errs, c.forsake())
	}
	if o.ownSup {
		errs = append(errs, o.Supervisor.Close())
	}
	for _, out := range o.outer { // a nested owner's connections to the outer supervisors, made by init
		errs = append(errs, out.Close())
	}
	errs = append(errs, o.Ledger.Close())
	// The process's cgroup directory goes with its last scope: an owner that exits after Close
	// leaves no empty directory for a reap to find.
	scope.ReleaseOwnerDir()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("custody: close: %w", err)
	}
	return nil
}

// stopAll stops every child the owner holds, in parallel, and returns what failed.
func (o *Owner) stopAll() []error {
	cs := o.held()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = c.closeChild(o.Stop) })
	}
	wg.Wait()
	return errs
}

// closeChild stops c for Close and releases it. A child handed over meanwhile is not an error.
func (c *Child) closeChild(opts StopOptions) error {
	ctx := context.Background() // the stop is bounded by its grace and kill wait, the release by the ledger's LockTimeout
	res := stopForClose(c, ctx, opts)
	if c.owned() != nil {
		return nil
	}
	if !res.OK() {
		return fmt.Errorf("pid %d: %s: %s", c.ID.PID, res.Outcome, res.Reason)
	}
	return c.ReleaseSoon(ctx) // the rows' drops are one write, Close's ledger.Close
}

// stopForClose is [Child.Stop]; tests make it fail, as a stop that cannot be made to time out on
// demand would.
var stopForClose = (*Child).Stop

// forsake ends custody of a child whose exit Close could not prove, as the owner's death would
// (see [Owner.Close]): its handles are closed, a cgroup or a job with them, which kills what it
// holds; its coverage and its row stay. It reports that the child's exit is unproven.
func (c *Child) forsake() error {
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	if c.released {
		return nil
	}
	c.released = true
	c.releaseErr = fmt.Errorf("custody: release pid %d: the owner closed before its exit was proven", c.ID.PID)
	c.owner.untrack(c)
	if err := errors.Join(c.proc.Close(), c.scope.Close()); err != nil {
		return fmt.Errorf("pid %d: %w", c.ID.PID, err)
	}
	return nil
}
