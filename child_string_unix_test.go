//go:build unix

package custody_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/custody-dev/custody"
)

// A Child prints as its PID, purpose and scope, not as its internals; a second Stop says why it
// is already-exited, as every outcome but exited does.
func TestChildStringAndSecondStop(t *testing.T) {
	o := newOwner(t)
	c, _ := start(t, o, custody.StartOptions{Purpose: "serve"})
	got := fmt.Sprintf("%v", c)
	want := fmt.Sprintf("pid %d (serve, ", c.ID.PID)
	if !strings.HasPrefix(got, want) || strings.ContainsAny(got, "{&") || got != c.String() {
		t.Errorf("%%v of a Child: %q; want it to start %q and be its String", got, want)
	}
	if res := c.Stop(context.Background(), custody.StopOptions{}); res.Outcome != custody.Exited {
		t.Fatalf("first Stop: %+v", res)
	}
	res := c.Stop(context.Background(), custody.StopOptions{})
	if res.Outcome != custody.AlreadyExited || res.Reason == "" {
		t.Errorf("second Stop: %+v; want already-exited with a reason", res)
	}
}
