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
	"github.com/custody-dev/custody/stop"
)

// Child is an owned child process and its scope.
type Child struct {
	Cmd *exec.Cmd
	// ID is the child's incarnation, read at spawn.
	ID procid.ID

	owner   *Owner
	scope   *scope.Scope
	proc    *authority.Process
	row     ledger.Row
	covered bool
	reaping bool // reap runs: the leader is reaped by it, not by abort

	done    chan struct{} // closed when the leader has been reaped
	waitErr error

	releaseMu sync.Mutex
	released  bool
}

// reap waits for the leader: its exit status is kept for [Child.Wait], and the zombie does not
// linger. After it the PID may be recycled; the scope re-proves its identity from then on.
func (c *Child) reap() {
	c.waitErr = c.Cmd.Wait()
	close(c.done)
}

// Wait waits for the child (the scope's leader) to exit and returns what [exec.Cmd.Wait] did.
// Other members of its scope may still run: [Child.Stop] ends them.
func (c *Child) Wait() error {
	<-c.done
	return c.waitErr
}

// Done is closed when the child has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Signal sends sig to the child's whole scope: its process group on Unix; on Windows only
// os.Kill, which terminates the job.
func (c *Child) Signal(sig os.Signal) error { return c.scope.Signal(sig) }

// Stop stops the child's scope through the authority retained from its spawn: SIGTERM to the
// scope, the grace, SIGKILL, and an outcome that reports only what was observed. When every
// member has exited, the child is released (see [Child.Release]); otherwise it stays covered.
func (c *Child) Stop(ctx context.Context, opts stop.Options) stop.Result {
	res := stop.Stop(ctx, stop.Target{PID: c.ID.PID, Process: c.proc, Scope: c.scope}, opts)
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
// still runs, because an uncovered survivor would outlive the owner.
func (c *Child) Release(ctx context.Context) error {
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	if c.released {
		return nil
	}
	select {
	case <-c.done:
	default:
		return fmt.Errorf("custody: release pid %d: it is still running", c.ID.PID)
	}
	if empty, err := c.scope.Empty(); err != nil || !empty {
		return fmt.Errorf("custody: release pid %d: its %v still has members (%v)", c.ID.PID, c.scope, err)
	}
	c.released = true
	err := errors.Join(c.owner.uncover(c.scope), c.dropRow(ctx), c.proc.Close(), c.scope.Close())
	if err != nil {
		return fmt.Errorf("custody: release pid %d: %w", c.ID.PID, err)
	}
	return nil
}

func (c *Child) dropRow(ctx context.Context) error {
	if c.row.PID == 0 {
		return nil
	}
	return c.owner.Ledger.Drop(ctx, []ledger.Row{c.row})
}

// abort kills a child whose start failed part way, and undoes what was done.
func (c *Child) abort() {
	if c.scope != nil {
		c.scope.Signal(os.Kill)
	}
	c.Cmd.Process.Kill()
	if c.reaping {
		<-c.done
	} else {
		c.Cmd.Wait()
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
