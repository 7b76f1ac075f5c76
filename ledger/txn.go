package ledger

import (
	"cmp"
	"context"
	"os"
	"slices"
)

// Txn is a write prepared ahead: the lock is held, the rows are read and pruned, and the
// temporary file is made, so that the change itself costs one write and one rename. An owner
// begins one while its child execs and commits the child's row once the PID is known. Every Txn
// must end in exactly one Commit or Abort: it holds the lock until then, and other writers wait
// for it (at most their lock timeout).
type Txn struct {
	l      *Ledger
	unlock func()
	tmp    *os.File
	buf    *[]byte // from readBufs; the rows alias it
	rows   []Row
	rep    Report
}

// Begin takes the lock and prepares a write (see [Txn]).
func (l *Ledger) Begin(ctx context.Context) (tx *Txn, err error) {
	if err := prepareDir(l.path); err != nil {
		return nil, err
	}
	unlock, err := lock(ctx, l.path+".lock", cmp.Or(l.LockTimeout, DefaultLockTimeout))
	if err != nil {
		return nil, err
	}
	tx = &Txn{l: l, unlock: unlock}
	defer func() {
		if err != nil {
			tx.Abort()
		}
	}()
	removeStaleTemps(l.path)
	tx.buf = readBufs.Get().(*[]byte)
	p, data, err := l.readLocked(&tx.rep, *tx.buf)
	*tx.buf = data
	if err != nil {
		return nil, err
	}
	tx.rows = prune(p.rows, &tx.rep)
	tx.rep.Malformed = p.malformed
	if tx.tmp, err = createTemp(l.path); err != nil {
		return nil, err
	}
	return tx, nil
}

// Commit drops the rows of the replaced PIDs, passes the rest to fn and atomically replaces the
// file with what fn returns, then releases the lock. fn must not block.
func (tx *Txn) Commit(replaced []int, fn func(rows []Row) ([]Row, error)) (Report, error) {
	defer tx.Abort()
	rows := slices.DeleteFunc(tx.rows, func(r Row) bool { return slices.Contains(replaced, r.PID) })
	tx.rep.Pruned += len(tx.rows) - len(rows)
	rows, err := fn(rows)
	if err != nil {
		return tx.rep, err
	}
	tmp := tx.tmp
	tx.tmp = nil
	return tx.rep, commitTemp(tmp, tx.l.path, rows)
}

// Abort releases the lock without writing. It does nothing after Commit or a first Abort.
func (tx *Txn) Abort() {
	if tx.buf != nil {
		tx.rows = nil // they alias the buffer, which the next transaction overwrites
		readBufs.Put(tx.buf)
		tx.buf = nil
	}
	if tx.tmp != nil {
		tx.tmp.Close()
		os.Remove(tx.tmp.Name())
		tx.tmp = nil
	}
	if tx.unlock != nil {
		tx.unlock()
		tx.unlock = nil
	}
}
