package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// replaceUnlocked writes body over the ledger as a writer without the lock does: a temporary
// file in the same directory, renamed over it.
func replaceUnlocked(t *testing.T, path, body string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".unlocked-writer")
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestUnlockedWriterKept: a row that a writer without the lock puts in while a custody writer
// holds the lock between its read and its rename survives the custody write, whether that write
// read the file (a first write, a plain Update) or reused its snapshot (a handle's next write),
// and whether it was a prepared append or a general change.
func TestUnlockedWriterKept(t *testing.T) {
	ctx := context.Background()
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	// This process stands for the unlocked writer's row: alive, so no prune drops it.
	foreign := fmt.Sprintf(`{"pid": %d, "create_time": null, "purpose": "mcp-helper", "hermes": true}`, os.Getpid())
	for _, tc := range []struct {
		desc     string
		snapshot bool // write once first, so the write under test starts from the snapshot
		append   bool
	}{{"read, append", false, true}, {"snapshot, append", true, true}, {"read, update", false, false}, {"snapshot, update", true, false}} {
		t.Run(tc.desc, func(t *testing.T) {
			l := tempLedger(t)
			defer l.Close()
			row := ledger.NewRow(self, procid.Incarnation{})
			row.PID = 4194301 // any PID but the foreign row's: written after the prune, it stays
			if tc.snapshot {
				if _, err := l.Add(ctx, row); err != nil {
					t.Fatal(err)
				}
			}
			var rep ledger.Report
			if tc.append {
				tx, err := ledger.BeginAppend(l, ctx)
				if err != nil {
					t.Fatal(err)
				}
				replaceUnlocked(t, l.Path(), "["+foreign+"]")
				rep, err = tx.Append(row)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				tx, err := ledger.Begin(l, ctx)
				if err != nil {
					t.Fatal(err)
				}
				replaceUnlocked(t, l.Path(), "["+foreign+"]")
				rep, err = ledger.Commit(tx, nil, func(rows []ledger.Row) ([]ledger.Row, error) { return append(rows, row), nil })
				if err != nil {
					t.Fatal(err)
				}
			}
			body, _ := os.ReadFile(l.Path())
			if !strings.Contains(string(body), foreign) || rep.Merged != 1 {
				t.Fatalf("merged %d times; the unlocked writer's row is lost:\n%s", rep.Merged, body)
			}
			rows, err := l.Rows(ctx)
			if err != nil || len(rows) != 2 {
				t.Errorf("rows after the merge: %d, %v; want the two", len(rows), err)
			}
		})
	}
}
