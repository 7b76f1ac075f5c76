package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// tempLedger returns a ledger whose directory does not exist yet.
func tempLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	return ledger.Open(filepath.Join(testproc.TempDir(t), "state", "spawn-ledger.json"))
}

// TestCorrupt: a read of a corrupt ledger says so and moves nothing; a write moves it to .corrupt
// with its bytes and starts fresh, and a second corrupt file does not overwrite the first (the
// hard link that claims the quarantine name never replaces).
func TestCorrupt(t *testing.T) {
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
		if !ok || rows != nil || ce.MovedTo != "" {
			t.Fatalf("Rows on a corrupt file = %v, %v; want a *CorruptError, nothing moved", rows, err)
		}
		if got, _ := os.ReadFile(l.Path()); string(got) != body {
			t.Fatalf("Rows changed the corrupt file: %q", got)
		}
		rep, err := l.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) { return rows, nil })
		if err != nil || rep.Quarantined == nil {
			t.Fatalf("a write to a corrupt file: %+v, %v; want it quarantined", rep, err)
		}
		ce = rep.Quarantined
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

// TestBeginAppend: a prepared append writes the kept rows ahead; appending a row whose PID a kept
// row has (a stale row of a recycled PID) rewrites the file with the row replaced.
func TestBeginAppend(t *testing.T) {
	l := tempLedger(t)
	ctx := context.Background()
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	for _, purpose := range []string{"first", "second"} {
		tx, err := ledger.BeginAppend(l, ctx)
		if err != nil {
			t.Fatal(err)
		}
		row := ledger.NewRow(self, procid.Incarnation{})
		row.Purpose = purpose
		if _, err := tx.Append(row); err != nil {
			t.Fatal(err)
		}
		rows, err := l.Rows(ctx)
		if err != nil || len(rows) != 1 || rows[0].Purpose != purpose {
			t.Fatalf("after appending %q: %+v, %v", purpose, rows, err)
		}
	}
}

// TestLenientRead: the files the Hermes reader takes as rosters are rosters here too, never
// quarantined: a 0-byte or blank file is empty, a byte order mark is skipped, and Python's NaN and
// Infinity are values, kept byte for byte through a rewrite. A row whose identity is not a number
// is malformed, and only that row goes.
func TestLenientRead(t *testing.T) {
	ctx := context.Background()
	// This process is alive, and a null create_time cannot prove it dead: the row stays.
	nan := fmt.Sprintf(`{"pid": %d, "create_time": null, "port": NaN, "x": -Infinity}`, os.Getpid())
	tests := []struct {
		desc string
		body string
		want int // rows read
	}{
		{"0 bytes", "", 0},
		{"white space", " \n\t", 0},
		{"byte order mark", "\xef\xbb\xbf[" + nan + "]", 1},
		{"byte order mark alone", "\xef\xbb\xbf", 0},
		{"NaN and Infinity as values", "[" + nan + "]", 1},
		{"identity not a number", `[{"pid": 4194001, "create_time": NaN}, {"pid": 4194002, "start_ticks": "7"}, ` + nan + `]`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			l := tempLedger(t)
			os.MkdirAll(filepath.Dir(l.Path()), 0o700)
			if err := os.WriteFile(l.Path(), []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			rows, err := l.Rows(ctx)
			if err != nil || len(rows) != tt.want {
				t.Fatalf("Rows = %d rows, %v; want %d and no error", len(rows), err, tt.want)
			}
			rep, err := l.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) { return rows, nil })
			if err != nil || rep.Quarantined != nil {
				t.Fatalf("rewrite = %+v, %v; want no quarantine", rep, err)
			}
			if _, err := os.Stat(l.Path() + ".corrupt"); err == nil {
				t.Fatal("the file was quarantined")
			}
			body, _ := os.ReadFile(l.Path())
			if strings.Contains(tt.body, nan) && !strings.Contains(string(body), nan) {
				t.Errorf("the row with NaN was not kept byte for byte:\n%s", body)
			}
			if strings.Contains(string(body), "4194001") || strings.Contains(string(body), "4194002") {
				t.Errorf("a row whose identity is not a number survived:\n%s", body)
			}
		})
	}
}

// TestTooDeep: a ledger nested beyond MaxNesting, valid JSON or not, is refused as unreadable by
// readers and writers alike, and left as it was: neither read as an empty roster nor quarantined.
func TestTooDeep(t *testing.T) {
	l := tempLedger(t)
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Dir(l.Path()), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{ledger.MaxNesting + 1, 10000, 10002} {
		body := strings.Repeat("[", n) + strings.Repeat("]", n)
		if err := os.WriteFile(l.Path(), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if rows, err := l.Rows(ctx); !errors.Is(err, ledger.ErrTooDeep) || rows != nil {
			t.Errorf("Rows on a %d-deep file = %v, %v; want ErrTooDeep", n, rows, err)
		}
		if _, err := l.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) { return rows, nil }); !errors.Is(err, ledger.ErrTooDeep) {
			t.Errorf("Update on a %d-deep file: %v; want ErrTooDeep", n, err)
		}
		if b, _ := os.ReadFile(l.Path()); string(b) != body {
			t.Errorf("the %d-deep file was changed", n)
		}
		if _, err := os.Stat(l.Path() + ".corrupt"); err == nil {
			t.Fatalf("the %d-deep file was quarantined", n)
		}
	}
	body := strings.Repeat("[", ledger.MaxNesting) + strings.Repeat("]", ledger.MaxNesting)
	os.WriteFile(l.Path(), []byte(body), 0o600)
	if rows, err := l.Rows(ctx); err != nil || len(rows) != 0 {
		t.Errorf("Rows on a %d-deep file = %v, %v; want no rows and no error", ledger.MaxNesting, rows, err)
	}
}
