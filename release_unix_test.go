//go:build unix

package custody_test

import (
	"context"
	"testing"
	"time"

	"github.com/custody-dev/custody"
)

// TestReleaseDuringStop: a Release the owner calls while a Stop of the same child is under way
// (the child exited on the Stop's request, its scope empty, and the Stop not yet done watching
// it) must not close the handles the Stop is using: the Stop reports exited, not no-authority
// over a closed scope, and both the Stop and the Release succeed. The race is tried on several
// children, since either may win it.
func TestReleaseDuringStop(t *testing.T) {
	o := newOwner(t)
	ctx := context.Background()
	for range 8 {
		c, _, _ := start(t, o, custody.StartOptions{})
		var res custody.StopResult
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			res = c.Stop(ctx, custody.StopOptions{Grace: 30 * time.Second})
		}()
		<-c.Done() // the worker exits at the Stop's request
		err := c.Release(ctx)
		<-stopped
		if !res.OK() {
			t.Errorf("pid %d: stop during a release: %s: %s", c.ID.PID, res.Outcome, res.Reason)
		}
		if err != nil {
			t.Errorf("pid %d: release during a stop: %v", c.ID.PID, err)
		}
	}
	if rows, err := o.Ledger.Rows(ctx); err != nil || len(rows) != 0 {
		t.Errorf("rows left after every child was stopped and released: %v, %v", rows, err)
	}
}
