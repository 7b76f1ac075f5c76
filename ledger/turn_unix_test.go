//go:build unix

package ledger_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/custody-dev/custody/ledger"
)

// TestTurnQueuesInProcess: a handle's writes from many goroutines, while one transaction holds
// the lock far longer than their LockTimeout, queue behind it and all succeed: the timeout bounds
// a wait for another process's hold, not for the handle's own transactions.
func TestTurnQueuesInProcess(t *testing.T) {
	l := tempLedger(t)
	pool := cats(t, 9)
	tx, err := l.LockAppend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l.LockTimeout = time.Millisecond
	errs := make(chan error, len(pool)-1)
	for _, pid := range pool[1:] {
		go func() { errs <- register(l, pid, "serve") }()
	}
	// The condition under test, not a synchronisation: the hold outlasts the writers' timeout
	// fifty times over (a writer that had not yet begun to wait by the end would pass regardless).
	time.Sleep(50 * time.Millisecond)
	if err := tx.PrepareAppend(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Append(rowFor(t, pool[0])); err != nil {
		t.Fatal(err)
	}
	for range pool[1:] {
		if err := <-errs; err != nil {
			t.Errorf("a write queued behind the handle's own transaction: %v", err)
		}
	}
	rows, err := l.Rows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := pidsOf(rows); !slices.Equal(got, sortedPIDs(pool...)) {
		t.Fatalf("rows of %v, want %v", got, sortedPIDs(pool...))
	}
}

// TestTurnHonoursContext: a write queued behind the handle's own transaction ends when its
// context does, with the context's error (not a *LockedError: no other process held the lock),
// and writes nothing.
func TestTurnHonoursContext(t *testing.T) {
	l := tempLedger(t)
	pool := cats(t, 2)
	if err := register(l, pool[0], "serve"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(l.Path())
	tx, err := l.LockAppend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = l.Add(ctx, rowFor(t, pool[1]))
	if !errors.Is(err, context.DeadlineExceeded) || ledger.IsLocked(err) {
		t.Errorf("Add queued behind a held transaction, its context ended = %v; want the context's error", err)
	}
	tx.Abort()
	if after, _ := os.ReadFile(l.Path()); string(after) != string(before) {
		t.Errorf("the ledger changed although the queued write gave up")
	}
}
