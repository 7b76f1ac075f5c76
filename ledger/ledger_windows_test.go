package ledger_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// TestWriteWhileReaderHoldsFile: readers take no lock (custody's ps, Hermes), so a write must
// succeed while a reader holds the ledger open, as it does for the span of one read. On Windows
// os.Rename (MoveFileEx) refuses to replace a file that any process holds open, whatever its
// share mode: the write must wait the reader out, within a bound.
func TestWriteWhileReaderHoldsFile(t *testing.T) {
	l := tempLedger(t)
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Add(ctx, ledger.NewRow(self, procid.Incarnation{})); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const readSpan = 100 * time.Millisecond // a slow read; the scenario, not synchronisation
	time.AfterFunc(readSpan, func() { f.Close() })
	row := ledger.NewRow(self, procid.Incarnation{})
	row.Purpose = "second"
	if _, err := l.Add(ctx, row); err != nil {
		t.Fatalf("a write while a reader held the ledger for %v: %v", readSpan, err)
	}
	rows, err := l.Rows(ctx)
	if err != nil || len(rows) != 1 || rows[0].Purpose != "second" {
		t.Fatalf("after the write: %+v, %v", rows, err)
	}
}
