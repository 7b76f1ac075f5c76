package ledger_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/custody-dev/custody/ledger"
)

// TestDropSoon: a row given to DropSoon stays in the file until the handle's next write, which
// carries its drop: a start's append prepared ahead (whose spare is filled again without the row)
// drops it in the same rename that adds its own row. With no write to carry it, the handle writes
// it alone within DropDelay; Close writes what is pending before it returns. Rows of other
// handles' writes in between are kept.
func TestDropSoon(t *testing.T) {
	ctx := context.Background()
	pool := cats(t, 6)
	l := tempLedger(t)
	defer l.Close()
	rows := map[int]ledger.Row{}
	start := func(pid int) (prepared bool) {
		t.Helper()
		rows[pid], prepared = startAppend(t, l, pid)
		return prepared
	}
	inFile := func() []int { return filePIDs(t, l.Path()) }
	want := func(what string, pids ...int) {
		t.Helper()
		slices.Sort(pids)
		if got := inFile(); !slices.Equal(got, pids) {
			t.Errorf("%s: the ledger holds %v, want %v", what, got, pids)
		}
	}
	start(pool[0])
	start(pool[1])

	// Carried by the next start's write, which still finds it prepared ahead.
	l.DropSoon([]ledger.Row{rows[pool[0]]})
	want("before the next write", pool[0], pool[1])
	ledger.AwaitSpare(l)
	if !start(pool[2]) {
		t.Error("the start after a DropSoon did not find its write prepared ahead")
	}
	want("after the next start", pool[1], pool[2])

	// Carried by a write that found the file changed by another handle.
	other := ledger.Open(l.Path())
	if _, err := other.Add(ctx, rowFor(t, pool[3])); err != nil {
		t.Fatal(err)
	}
	l.DropSoon([]ledger.Row{rows[pool[1]]})
	start(pool[4])
	want("after a start over another handle's write", pool[2], pool[3], pool[4])

	// Written alone when no write comes.
	l.DropSoon([]ledger.Row{rows[pool[2]]})
	deadline := time.Now().Add(10 * ledger.DropDelay)
	for slices.Contains(inFile(), pool[2]) && time.Now().Before(deadline) {
		time.Sleep(ledger.DropDelay / 10)
	}
	want("a while after DropSoon, no write since", pool[3], pool[4])

	// Written by Close.
	l.DropSoon([]ledger.Row{rows[pool[4]]})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want("after Close", pool[3])
}
