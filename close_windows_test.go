package custody_test

import (
	"context"
	"errors"
	"testing"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// TestOwnerClose: an owner with two children in jobs, one with a grandchild, closes: every one
// has exited when Close returns and their rows are dropped. Start then fails with ErrClosed and
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
	mustRows(t, o, 2)
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
