package custody_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// TestOwnerClose: an owner with two children in jobs, one with a grandchild, and a child it
// adopted with its grandchild, closes: every one has exited when Close returns and their rows
// are dropped. Start then fails with ErrClosed and
// starts nothing, and a second Close returns nil.
func TestOwnerClose(t *testing.T) {
	o := newOwner(t)
	var ids []procid.ID
	for _, args := range [][]string{{"-grandchild"}, nil} {
		cmd, w := workerCmd(t, args...)
		owned(t, o, cmd, custody.StartOptions{})
		_, got := w.ready(t)
		ids = append(ids, got...)
	}
	if len(ids) != 3 {
		t.Fatalf("workers reported %v; want a child, its grandchild and a child", ids)
	}
	g := startWinGiver(t, o.Ledger.Path())
	if _, err := o.Adopt(context.Background(), g.grant); err != nil {
		t.Fatal(err)
	}
	if f := g.Expect("result ", 30*time.Second); f[0] != "transferred" {
		t.Fatalf("the giver's result %q", f)
	}
	ids = append(ids, g.ids...)
	mustRows(t, o, 3)
	if err := o.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close returns once every exit is proven: no polling.
	for _, id := range ids {
		if err := gone(id); err != nil {
			t.Errorf("after Close: %v", err)
		}
	}
	mustRows(t, o, 0)
	cmd := testproc.Helper(t, "worker")
	if _, err := o.Start(context.Background(), cmd, custody.StartOptions{}); !errors.Is(err, custody.ErrClosed) {
		t.Errorf("Start after Close: %v; want ErrClosed", err)
	}
	if cmd.Process != nil {
		t.Errorf("Start after Close started pid %d", cmd.Process.Pid)
	}
	if err := o.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestOwnerCloseHandedAway: a child the owner handed to another owner survives the giver's
// Close, with its grandchild, and dies with the receiver.
func TestOwnerCloseHandedAway(t *testing.T) {
	o := newOwner(t)
	cmd, w := workerCmd(t, "-grandchild")
	c := owned(t, o, cmd, custody.StartOptions{})
	_, ids := w.ready(t)
	grant, err := c.Grant(custody.GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := startReceiver(t, o.Ledger.Path(), grant.String())
	if f := r.Expect("adopted ", 30*time.Second); f[0] != strconv.Itoa(c.ID.PID) {
		t.Fatalf("the receiver adopted pid %s, want %d", f[0], c.ID.PID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := grant.Wait(ctx); err != nil || res.Outcome != custody.Transferred {
		t.Fatalf("grant: %+v, %v", res, err)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mustRun(t, "after the giver's Close", ids)
	if owner := rowOwner(t, o.Ledger.Path(), c.ID.PID); owner != r.Process.Pid {
		t.Fatalf("the ledger names owner %d after the giver's Close, want the receiver %d", owner, r.Process.Pid)
	}
	terminate(t, r)
	waitAllGone(t, "after the receiver's death", ids)
}
