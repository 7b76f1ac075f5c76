package ledger

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// DropDelay is the longest a row given to [Ledger.DropSoon] waits for a write of its handle to
// carry its drop before the handle writes it alone.
const DropDelay = 50 * time.Millisecond

// DropSoon drops rows as [Ledger.Drop] does, with the handle's next write instead of a write of
// their own: the rewrite an owner's next start makes anyway (its row appended) carries the drop of
// the rows of the children that ended since, so that a child costs the ledger one write, not two.
// When no write of the handle comes within [DropDelay], the handle writes the drop by itself;
// [Ledger.Flush] and [Ledger.Close] write it at once, and after Close DropSoon itself does.
//
// Until then the rows stay in the file. Such a row names an exited process, and every reader
// proves a row before acting on it (by the start and the pidfs id its process had): a row whose
// process is gone, or whose PID a stranger now has, licenses nothing, and a write that probes it
// prunes it. A process that dies before the drop is written leaves those rows as its death
// leaves the rows of its running children: for later writers to prune on proof.
func (l *Ledger) DropSoon(rows []Row) {
	if len(rows) == 0 {
		return
	}
	l.mu.Lock()
	l.dropping = append(l.dropping, rows...)
	if l.closed {
		// After Close no later write of the handle is to come, and its user may be removing the
		// ledger's directory: a timer's write then would land in it (a child released after its
		// owner closed, its exit late). The drop is written now, as Drop writes it.
		l.mu.Unlock()
		l.Flush(context.Background())
		return
	}
	defer l.mu.Unlock()
	l.armDropLocked()
	// A spare filled with one of the rows (see fillSpare) would have the next start's write keep
	// it (see TryPrepared): it is filled again without them, off the start's path.
	if l.filled != nil && slices.ContainsFunc(l.filledRows, func(r Row) bool { return slices.ContainsFunc(rows, r.Same) }) {
		l.filled, l.filledRows = nil, nil
		l.refills.Go(l.fillSpare)
	}
}

// armDropLocked starts the timer that writes the pending drops when no write carried them. The
// caller holds l.mu.
func (l *Ledger) armDropLocked() {
	if l.dropTimer == nil && len(l.dropping) > 0 {
		l.dropTimer = time.AfterFunc(DropDelay, l.dropDue)
	}
}

// dropDue writes the drops no write carried within DropDelay. One that fails (the lock held by
// another process beyond the LockTimeout) is tried again a DropDelay later: the rows wait, as
// they would in the file of a process that died.
func (l *Ledger) dropDue() {
	l.mu.Lock()
	l.dropTimer = nil
	l.mu.Unlock()
	if err := l.Flush(context.Background()); err != nil {
		l.mu.Lock()
		l.armDropLocked()
		l.mu.Unlock()
	}
}

// Flush writes the drops [Ledger.DropSoon] left pending, if any, now, and returns once every
// drop given before the call is in the file.
func (l *Ledger) Flush(ctx context.Context) error {
	if l.pendingDrops() == 0 {
		// None pending may mean that a transaction of this handle under way took them (a start's):
		// its turn ends once it has written them or given them back, so the wait for the turn is
		// the wait for that write.
		endTurn, err := l.takeTurn(ctx)
		if err != nil {
			return fmt.Errorf("ledger: drop rows: %w", err)
		}
		endTurn()
		if l.pendingDrops() == 0 {
			return nil
		}
	}
	if _, err := l.Update(ctx, nil, func(rows []Row) ([]Row, error) { return rows, nil }); err != nil {
		return fmt.Errorf("ledger: drop rows: %w", err)
	}
	return nil
}

func (l *Ledger) pendingDrops() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.dropping)
}

// takeDrops takes the handle's pending drops into the transaction and removes them from its rows.
// The transaction gives them back unless it commits (see giveBackDrops): it is called after each
// read, the first and every read again, and applies all it took so far to the rows read.
func (tx *Txn) takeDrops() {
	l := tx.l
	l.mu.Lock()
	tx.drops = append(tx.drops, l.dropping...)
	l.dropping = nil
	l.mu.Unlock()
	if len(tx.drops) > 0 {
		tx.rows = slices.DeleteFunc(tx.rows, func(r Row) bool { return slices.ContainsFunc(tx.drops, r.Same) })
	}
}

// giveBackDrops returns the drops of a transaction that ends without writing them to the handle,
// for its next write.
func (tx *Txn) giveBackDrops() {
	if len(tx.drops) == 0 {
		return
	}
	l := tx.l
	l.mu.Lock()
	l.dropping = append(tx.drops, l.dropping...)
	l.armDropLocked()
	l.mu.Unlock()
	tx.drops = nil
}
