package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// tempLedger returns a ledger in a directory removed at cleanup (see testproc.TempDir).
func tempLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	return ledger.Open(filepath.Join(testproc.TempDir(t), "state", "spawn-ledger.json"))
}

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

// TestCorruptQuarantined: on Windows too a corrupt ledger is moved aside with its bytes, never
// over an earlier one, and the next write starts fresh. It exercises the hard link that claims
// the quarantine name, and the removal of the linked original.
func TestCorruptQuarantined(t *testing.T) {
	l := tempLedger(t)
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Dir(l.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	bodies := []string{`{"not": "an array"}`, "[{\"pid\": 1,"}
	for i, body := range bodies {
		if err := os.WriteFile(l.Path(), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		rows, err := l.Rows(ctx)
		ce, ok := errors.AsType[*ledger.CorruptError](err)
		if !ok || rows != nil {
			t.Fatalf("Rows on a corrupt file = %v, %v; want a *CorruptError", rows, err)
		}
		want := l.Path() + ".corrupt"
		if i > 0 {
			want += ".2"
		}
		if ce.MovedTo != want {
			t.Errorf("moved to %q, want %q", ce.MovedTo, want)
		}
		if got, _ := os.ReadFile(want); string(got) != body {
			t.Errorf("%s holds %q, want the original %q", want, got, body)
		}
	}
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Add(ctx, ledger.NewRow(self, procid.Incarnation{})); err != nil {
		t.Fatal(err)
	}
	if rows, err := l.Rows(ctx); err != nil || len(rows) != 1 || rows[0].PID != self.PID {
		t.Errorf("after the quarantine: %+v, %v; want one fresh row", rows, err)
	}
}
