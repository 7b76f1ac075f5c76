package ledger_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/custody-dev/custody/ledger"
)

// TestTryPrepared: after an owner's write its next start finds the write prepared ahead, and the
// row appended lands in a well-formed ledger beside the others; a write by another handle in
// between makes the prepared write stale, and the start prepares from the file instead and keeps
// that write's row; a plain write after a fill (a drop) leaves no byte of the fill behind.
func TestTryPrepared(t *testing.T) {
	ctx := context.Background()
	pool := cats(t, 5)
	l := tempLedger(t)
	defer l.Close()
	written := map[int]ledger.Row{}
	start := func(pid int, wantPrepared bool) {
		t.Helper()
		var prepared bool
		written[pid], prepared = startAppend(t, l, pid)
		if prepared != wantPrepared {
			t.Errorf("start of %d: prepared ahead %v, want %v", pid, prepared, wantPrepared)
		}
	}
	fileHas := func(pids ...int) {
		t.Helper()
		slices.Sort(pids)
		if got := filePIDs(t, l.Path()); !slices.Equal(got, pids) {
			t.Errorf("ledger holds %v, want %v", got, pids)
		}
	}
	start(pool[0], false) // the handle's first write: nothing made ahead
	start(pool[1], true)
	fileHas(pool[0], pool[1])

	other := ledger.Open(l.Path())
	if _, err := other.Add(ctx, rowFor(t, pool[2])); err != nil {
		t.Fatal(err)
	}
	start(pool[3], false) // the file changed under the handle: prepared from the file
	fileHas(pool[0], pool[1], pool[2], pool[3])

	if err := l.Drop(ctx, []ledger.Row{written[pool[0]], written[pool[1]]}); err != nil {
		t.Fatal(err)
	}
	fileHas(pool[2], pool[3])
	start(pool[4], true) // after the drop, made ahead again
	fileHas(pool[2], pool[3], pool[4])
}

// startAppend makes the write of an owner's start of pid, as Owner.Start does (LockAppend, the
// write prepared ahead or else PrepareAppend, Append), waits for its background, and returns the
// row and whether the write was prepared ahead.
func startAppend(t *testing.T, l *ledger.Ledger, pid int) (ledger.Row, bool) {
	t.Helper()
	tx, err := l.LockAppend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	prepared := tx.TryPrepared()
	if !prepared {
		if err := tx.PrepareAppend(); err != nil {
			t.Fatal(err)
		}
	}
	row := rowFor(t, pid)
	if _, err := tx.Append(row); err != nil {
		t.Fatal(err)
	}
	ledger.AwaitTail(l)
	return row, prepared
}

// filePIDs reads the ledger file itself, which must be a JSON array, and returns its rows' PIDs,
// sorted.
func filePIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct{ PID int }
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatalf("ledger is not a JSON array: %v\n%s", err, b)
	}
	var pids []int
	for _, r := range rows {
		pids = append(pids, r.PID)
	}
	slices.Sort(pids)
	return pids
}
