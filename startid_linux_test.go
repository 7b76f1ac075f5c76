package custody_test

import (
	"context"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
)

// TestStartIdentity: on the cgroup path, and on the process-group path with the gate, an owned
// child's start is taken from the clock around its fork, not read from /proc (see procid.Span).
// For each of many children, started one after another as an owner starts them (the
// reservation's path from the second on, in a cgroup), the start Start reports and the row
// records is the one /proc/PID/stat shows.
func TestStartIdentity(t *testing.T) {
	for _, kind := range []scope.Kind{scope.KindCgroup, scope.KindGroup} {
		t.Run("containment="+kind.Containment(), func(t *testing.T) {
			if kind == scope.KindCgroup {
				requireCgroups(t)
			}
			t.Setenv(scope.EnvContainment, kind.Containment())
			startIdentity(t, kind)
		})
	}
}

func startIdentity(t *testing.T, kind scope.Kind) {
	o := newOwner(t)
	ctx := context.Background()
	for i := range 30 {
		c, _, _ := start(t, o, custody.StartOptions{})
		if got := c.Containment(); got != kind.Containment() {
			t.Fatalf("start %d: containment %s, want %s", i, got, kind.Containment())
		}
		inc, err := procid.Read(c.ID.PID) // the worker runs until its stdin closes
		if err != nil {
			t.Fatal(err)
		}
		if c.ID.Start != inc.Start {
			t.Errorf("start %d: pid %d: Start says start %d, /proc shows %d", i, c.ID.PID, c.ID.Start, inc.Start)
		}
		rows, err := o.Ledger.Rows(ctx)
		if err != nil || len(rows) != 1 {
			t.Fatalf("start %d: rows %v, %v", i, rows, err)
		}
		if r := rows[0]; r.PID != inc.PID || r.StartTicks == nil || *r.StartTicks != inc.Start {
			t.Errorf("start %d: row names pid %d start %v, /proc shows %d start %d", i, r.PID, r.StartTicks, inc.PID, inc.Start)
		}
		if res := c.Stop(ctx, stop.Options{Grace: time.Second}); res.Outcome != stop.Exited {
			t.Fatalf("start %d: stop: %+v", i, res)
		}
	}
}
