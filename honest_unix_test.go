//go:build unix

package custody_test

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
)

// A Child prints as its PID, purpose and scope, not as its internals; a second Stop says why it
// is already-exited, as every outcome but exited does.
func TestChildStringAndSecondStop(t *testing.T) {
	o := newOwner(t)
	c, _, _ := start(t, o, custody.StartOptions{Purpose: "serve"})
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

// A Replace whose stop of the previous generation needed the kill after the grace says so.
func TestSlotReplaceTellsForced(t *testing.T) {
	o := newOwner(t)
	slot := &custody.Slot{Owner: o, Purpose: "serve", Stop: custody.StopOptions{Grace: 50 * time.Millisecond}}
	ctx := context.Background()
	worker := func(args ...string) (*exec.Cmd, *bufio.Scanner) {
		cmd := testproc.Helper(t, "worker", args...)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		t.Cleanup(func() { in.Close() })
		return cmd, bufio.NewScanner(out)
	}
	cmd, ready := worker("-slow") // exits a second after SIGTERM: past the grace
	if _, err := slot.Replace(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	ready.Scan() // its SIGTERM handler is in place
	if res := slot.LastStop(); res != (custody.StopResult{}) {
		t.Errorf("LastStop after the first Replace: %+v, want none", res)
	}
	cmd, _ = worker()
	if _, err := slot.Replace(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	if res := slot.LastStop(); res.Outcome != custody.Exited || !res.Forced {
		t.Errorf("LastStop after replacing a generation that outlived the grace: %+v, want exited, forced", res)
	}
}

// A Stop of a child already released with its row's drop still pending (released by itself
// after its exit, or by ReleaseSoon) returns with the row gone from the ledger, as a Stop that
// releases the child itself does.
func TestStopAfterReleaseSoon(t *testing.T) {
	o := newOwner(t)
	c, _, _ := start(t, o, custody.StartOptions{Purpose: "serve"}, "-exit", "0")
	<-c.Done()
	if err := c.ReleaseSoon(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := c.Stop(context.Background(), custody.StopOptions{}); res.Outcome != custody.AlreadyExited {
		t.Errorf("Stop of a released child: %+v; want already-exited", res)
	}
	rows, err := o.Ledger.Rows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.PID == c.ID.PID {
			t.Errorf("after the Stop: the child's row %+v; want it dropped", r)
		}
	}
}
