package ledger_test

import (
	"context"
	"testing"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// TestAppendUnprepared: LockAppend then Append with no PrepareAppend between, a sequence the API
// allows, records the row; a second Append, and one after Abort, are errors, not panics.
func TestAppendUnprepared(t *testing.T) {
	l := tempLedger(t)
	ctx := context.Background()
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := l.LockAppend(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Append(ledger.NewRow(self, procid.Incarnation{})); err != nil {
		t.Fatalf("Append without PrepareAppend: %v", err)
	}
	if rows, err := l.Rows(ctx); err != nil || len(rows) != 1 || rows[0].PID != self.PID {
		t.Errorf("after the unprepared append: %+v, %v; want its row", rows, err)
	}
	if _, err := tx.Append(ledger.NewRow(self, procid.Incarnation{})); err == nil {
		t.Errorf("a second Append succeeded")
	}
	tx, err = l.LockAppend(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Abort()
	if _, err := tx.Append(ledger.NewRow(self, procid.Incarnation{})); err == nil {
		t.Errorf("an Append after Abort succeeded")
	}
	if _, err := l.Add(ctx, ledger.NewRow(self, procid.Incarnation{})); err != nil {
		t.Errorf("the lock after it all: %v", err)
	}
}
