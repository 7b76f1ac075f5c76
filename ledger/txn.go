package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// Txn is an append prepared ahead, for an owner's start: [Ledger.LockAppend] takes the lock before
// the child starts, [Txn.PrepareAppend] reads, prunes and writes the kept rows into the temporary
// file while the child execs, and [Txn.Append] adds the child's row once its PID is known, so that
// recording it costs one short write and one rename. Every Txn must end in exactly one Append or
// Abort: it holds the lock until then, and other writers wait for it (another process's at most
// their lock timeout; this handle's queue behind it, see takeTurn). Other writes go through
// [Ledger.Update], [Ledger.Add] and [Ledger.Drop].
type Txn struct {
	l      *Ledger
	unlock func()
	tmp    *os.File
	old    *os.File // the file read, held open until it is replaced (see releaseReplaced)
	// read identifies the file read, or is nil when there was none: the rename checks that the
	// ledger is still that file (see errStale).
	read os.FileInfo
	buf  *[]byte // from readBufs; the rows alias it
	rows []Row
	rep  Report
	// prewritten reports that the temporary file already holds the opening of the array and the
	// kept rows (see beginAppend).
	prewritten bool
	// deferRelease leaves the replaced file, and the new snapshot's decoding, to the caller of
	// finish (Append's background).
	deferRelease bool
	snap         *snapshot // the snapshot finish left undecoded from its row snapKept on
	snapKept     int
	drops        []Row // the handle's pending drops this write carries (see takeDrops)
}

// errTxnEnded refuses a second end of a transaction: it released its lock at the first.
var errTxnEnded = errors.New("the transaction has ended (appended or aborted)")

// rowRoom is the room a write reserves for a row beyond the ledger's current size: rows run to
// 300-500 bytes, and a block is what a filesystem reserves anyway.
const rowRoom = 4 << 10

// begin takes the lock and prepares a write (see [Txn]); probe false prunes by boot id only (see
// beginAppend).
func (l *Ledger) begin(ctx context.Context, probe bool) (*Txn, error) {
	tx, err := l.lockTxn(ctx)
	if err != nil {
		return nil, err
	}
	if err := tx.prepare(probe); err != nil {
		return nil, err
	}
	return tx, nil
}

// lockTxn takes the lock and returns a transaction holding it, not yet prepared.
func (l *Ledger) lockTxn(ctx context.Context) (_ *Txn, err error) {
	endTurn, err := l.takeTurn(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			endTurn()
		}
	}()
	l.awaitTail()
	if err := prepareDir(l.path); err != nil {
		return nil, err
	}
	lockInfo, err := checkFiles(l.path)
	if err != nil {
		return nil, err
	}
	unlock, err := l.lockHeld(ctx, lockInfo)
	if err != nil {
		return nil, err
	}
	return &Txn{l: l, unlock: func() { unlock(); endTurn() }}, nil
}

// prepare reads and prunes the rows under the lock and makes the temporary file. On error it
// has aborted tx, lock included.
func (tx *Txn) prepare(probe bool) (err error) {
	defer func() {
		if err != nil {
			tx.Abort()
		}
	}()
	l := tx.l
	var rows []Row
	var size int64
	if s := l.takeSnapshot(); s != nil && s.current(l.path) {
		// The ledger is the file this handle wrote last: its rows are known. Temporary files of
		// writers that died since are left to the next full read.
		rows, size, tx.buf, tx.old, tx.read = s.rows, s.fi.Size(), s.buf, s.file, s.fi
	} else {
		if s != nil {
			s.release()
		}
		removeStaleTemps(l.path)
		pre, err := lstatNow(l.path)
		if err != nil {
			return fmt.Errorf("read ledger: %w", err)
		}
		tx.buf = readBufs.Get().(*[]byte)
		quarantined := tx.rep.Quarantined
		p, data, old, err := l.readLocked(&tx.rep, *tx.buf)
		*tx.buf, tx.old = data, old
		if err != nil {
			return err
		}
		if tx.rep.Quarantined != quarantined {
			pre = nil // moved aside: no file is in place now
		}
		rows, size, tx.rep.Malformed, tx.read = p.rows, int64(len(data)), p.malformed, readStat(old, pre)
	}
	tx.rows = prune(rows, &tx.rep, probe)
	tx.takeDrops()
	// Room for the kept rows and one more: most writes add or drop a row.
	if tx.tmp, err = l.newTemp(size + rowRoom); err != nil {
		return err
	}
	return nil
}

// commit drops the rows of the replaced PIDs, passes the rest to fn and atomically replaces the
// file with what fn returns, then releases the lock. fn must not block.
//
// When the ledger was replaced since it was read (by a writer that does not take the lock), the
// file in place is read again and the change applied to its rows: fn may be called more than once.
func (tx *Txn) commit(replaced []int, fn func(rows []Row) ([]Row, error)) (Report, error) {
	defer tx.Abort()
	for try := 0; ; try++ {
		err := tx.commitOnce(replaced, fn)
		if !errors.Is(err, errStale) {
			return tx.rep, err
		}
		if try == maxMerges {
			return tx.rep, fmt.Errorf("write ledger: replaced %d times under the lock: %w", try+1, err)
		}
		if err := tx.reread(); err != nil {
			return tx.rep, err
		}
	}
}

func (tx *Txn) commitOnce(replaced []int, fn func(rows []Row) ([]Row, error)) error {
	rows := slices.DeleteFunc(tx.rows, func(r Row) bool { return slices.Contains(replaced, r.PID) })
	tx.rep.Pruned += len(tx.rows) - len(rows)
	rows, err := fn(rows)
	if err != nil {
		return err
	}
	tmp := tx.tmp
	tx.tmp = nil
	return tx.finish(tmp, rows, 0, func(w io.Writer) error {
		if tx.prewritten { // the change is not a plain append: start the file again
			if err := tmp.Truncate(0); err != nil {
				return err
			}
			if _, err := tmp.Seek(0, io.SeekStart); err != nil {
				return err
			}
		}
		return encode(w, rows)
	})
}

// Abort releases the lock without writing. It does nothing after Append or a first Abort.
func (tx *Txn) Abort() {
	tx.giveBackDrops()
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
	closeHeld(tx.old)
	tx.old = nil
	if tx.unlock != nil {
		tx.unlock()
		tx.unlock = nil
	}
}

// beginAppend prepares a write that will add one row ([Txn.Append]): it also writes the kept rows
// into the temporary file ahead, so that the append costs one short write and the rename. It is
// [Ledger.LockAppend] followed by [Txn.PrepareAppend].
func (l *Ledger) beginAppend(ctx context.Context) (*Txn, error) {
	tx, err := l.LockAppend(ctx)
	if err != nil {
		return nil, err
	}
	if err := tx.PrepareAppend(); err != nil {
		return nil, err
	}
	return tx, nil
}

// LockAppend is the first half of beginAppend: it takes the lock (waiting at most
// LockTimeout, and failing with a [*LockedError] after) and returns a transaction that
// [Txn.PrepareAppend] must complete, or [Txn.Abort] end, before any other use. An owner takes
// the lock before it starts its child, so that a lock it cannot get fails the start before the
// child runs, and prepares the rest while the child execs.
func (l *Ledger) LockAppend(ctx context.Context) (*Txn, error) { return l.lockTxn(ctx) }

// PrepareAppend is the second half of beginAppend: under the lock taken by
// [Ledger.LockAppend] it reads the rows, prunes them and writes the kept ones into the
// temporary file. On error the transaction is aborted (the lock released) and must not be used.
//
// It is meant to run while the caller's child execs, and so it prunes only rows of another boot,
// probing no PID: on a machine with few CPUs every system call it makes slows the exec it
// overlaps. The caller's other writes (the row's drop when the child ends) prune as usual.
func (tx *Txn) PrepareAppend() error {
	if tx.TryPrepared() {
		return nil
	}
	if err := tx.prepare(false); err != nil {
		return err
	}
	if err := encodeOpen(tx.tmp, tx.rows); err != nil {
		tx.Abort()
		return fmt.Errorf("write ledger: %w", err)
	}
	// Room for the appended row now, so that Append does not copy every row to grow the slice.
	tx.rows = slices.Grow(tx.rows, 1)
	tx.prewritten = true
	return nil
}

// TryPrepared completes, under the lock taken by [Ledger.LockAppend], the preparation that
// [Txn.PrepareAppend] makes, from the write the handle made ahead after its last write (see
// fillSpare), and reports whether it could: the ledger must still be the file the handle wrote
// last. It costs a link and no read or write, little enough for a start to make it before its
// child's exec rather than beside it. When it reports false, nothing changed: call
// PrepareAppend.
func (tx *Txn) TryPrepared() bool {
	l := tx.l
	l.mu.Lock()
	l.starts = true // an owner's handle: it keeps a spare (see newTemp)
	s := l.last
	// A row to drop that the spare holds (its drop came while the spare was being filled) would
	// be kept by this write.
	if s == nil || l.filled != s || l.spare == nil ||
		slices.ContainsFunc(l.filledRows, func(r Row) bool { return slices.ContainsFunc(l.dropping, r.Same) }) {
		l.mu.Unlock()
		return false
	}
	l.last = nil
	rows, pruned := l.filledRows, l.filledPruned
	sp, reserved, written := l.takeSpareLocked()
	tx.drops, l.dropping = l.dropping, nil // the spare was filled without them: this write drops them
	l.mu.Unlock()
	if !s.current(l.path) { // another process wrote since: the spare holds rows of the past
		sp.Close()
		s.release()
		tx.giveBackDrops()
		return false
	}
	f, err := nameSpare(sp, l.path)
	sp.Close()
	if err == nil {
		if _, err = f.Seek(written, io.SeekStart); err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
	if err != nil {
		s.release()
		tx.giveBackDrops()
		return false
	}
	if size := s.fi.Size() + rowRoom; size > reserved {
		preallocate(f, size)
	}
	tx.tmp, tx.buf, tx.old, tx.read = f, s.buf, s.file, s.fi
	tx.rows = slices.Grow(rows, 1)
	tx.rep.Pruned += pruned
	tx.prewritten = true
	return true
}

// Append adds row, replacing any row with its PID, and commits. After beginAppend the
// kept rows are already in the file: only the row and the array's end are written, unless a kept
// row has the PID (a stale row of a recycled PID), when the file is written anew. After
// [Ledger.LockAppend] alone it reads, prunes and writes everything itself, as [Ledger.Add] does.
// It ends the transaction: a second Append, or one after [Txn.Abort], is an error.
func (tx *Txn) Append(row Row) (Report, error) {
	// The spare for an owner's handle's next write (see newTemp) is made after the unlock: by the
	// append's background when the start's fast path commits, here otherwise.
	backgrounded := false
	defer func() {
		if !backgrounded {
			tx.l.afterWrite()
		}
	}()
	if tx.unlock == nil { // appended or aborted already: it holds nothing any more
		return tx.rep, fmt.Errorf("ledger: add pid %d: %w", row.PID, errTxnEnded)
	}
	if row.PID <= 0 {
		tx.Abort()
		return tx.rep, fmt.Errorf("ledger: add pid %d: not a positive pid", row.PID)
	}
	if tx.tmp == nil { // locked by LockAppend and never prepared: prepare now, as a write does
		if err := tx.prepare(true); err != nil {
			return tx.rep, fmt.Errorf("ledger: add pid %d: %w", row.PID, err)
		}
	}
	add := func(rows []Row) ([]Row, error) { return replaceRow(rows, row, &tx.rep) }
	if !tx.prewritten || tx.hasPID(row.PID) {
		return tx.commit(nil, add)
	}
	defer tx.Abort()
	raw, err := row.Raw()
	if err != nil {
		return tx.rep, err
	}
	row.raw = raw // for the snapshot, which would encode it again
	tmp := tx.tmp
	tx.tmp = nil
	tx.deferRelease = true
	// Only the appended row is new to the snapshot: the kept ones are as read (see snapshotRows).
	err = tx.finish(tmp, append(tx.rows, row), len(tx.rows), func(w io.Writer) error {
		return encodeClose(w, len(tx.rows), raw)
	})
	if err == nil {
		// A start waits for this append: what is left (the unlock, the replaced file's close,
		// the next spare) is done in the background, in one goroutine. The handle's next
		// transaction waits for it before it locks (see lockTxn), rather than finding the lock
		// held by its own past.
		tx.l.background(tx.unlock, tx.old, tx.snap, tx.snapKept)
		tx.unlock, tx.old, tx.snap = nil, nil, nil
		backgrounded = true
		return tx.rep, nil
	}
	tx.deferRelease = false
	if !errors.Is(err, errStale) {
		return tx.rep, err
	}
	if err := tx.reread(); err != nil {
		return tx.rep, err
	}
	return tx.commit(nil, add)
}

// hasPID reports whether a kept row has pid. It looks at each row in place: a Row is a few
// hundred bytes, and a start's append, which waits for this, would copy each one.
func (tx *Txn) hasPID(pid int) bool {
	for i := range tx.rows {
		if tx.rows[i].PID == pid {
			return true
		}
	}
	return false
}

// finish writes and renames the temporary file over the ledger, then lets the replaced file go
// and keeps the new one, with rows, as the handle's snapshot where files may be held. The first
// kept rows are known to be as a read decodes them (a start's kept rows): only the others are
// looked at for the snapshot, which at 100 rows spares a pass over some 36 KB of cold rows.
// With deferRelease, both are left to the caller: the snapshot, not yet decoded, in tx.snap.
func (tx *Txn) finish(tmp *os.File, rows []Row, kept int, write func(io.Writer) error) error {
	fi, err := finishTemp(tmp, tx.l.path, write, holdFiles, func() error { return checkUnchanged(tx.l.path, tx.read) })
	if err != nil {
		return err
	}
	tx.drops = nil // written
	if !tx.deferRelease {
		releaseReplaced(tx.old)
		tx.old = nil
	}
	if !holdFiles {
		return nil
	}
	s := &snapshot{file: tmp, fi: fi, buf: tx.buf, rows: rows}
	tx.buf, tx.rows = nil, nil // the snapshot's now
	if tx.deferRelease {
		// A start's append: decoding its row again for the snapshot (some 7 µs) is no part of
		// the start. The handle's next transaction waits for the background that does it.
		tx.snap, tx.snapKept = s, kept
		return nil
	}
	tx.l.keepDecoded(s, kept)
	return nil
}
