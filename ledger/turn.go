package ledger

import (
	"context"
	"fmt"
)

// takeTurn queues the caller behind the handle's other transactions, in the order they came,
// and returns the end of its turn; it fails only when ctx ends first. A handle's transactions
// take the lock one at a time, in process, before any of them tries the lock file: the lock file
// is a lock between processes, and one process's transactions trying it at once (an owner
// starting a burst of children while the rows of those that ended are dropped) would each poll
// it with a backoff and fail against one another after the LockTimeout, although no other
// process held it. Queued here, a transaction is woken the moment the one before it unlocks, and
// its LockTimeout bounds only its own wait for the file: only another process's hold fails it.
func (l *Ledger) takeTurn(ctx context.Context) (endTurn func(), err error) {
	l.mu.Lock()
	if l.turn == nil {
		l.turn = make(chan struct{}, 1)
	}
	turn := l.turn
	l.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("lock %s.lock: waiting for this process's other writes: %w", l.path, ctx.Err())
	}
}
