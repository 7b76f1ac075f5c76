package ledger

import (
	"bytes"
	"fmt"
	"os"
	"slices"
)

// A handle keeps one spare: a file made ahead in the ledger's directory, with no name (Linux's
// O_TMPFILE), which the next write names under the lock and fills instead of making its temporary
// file. Making a file is the costliest step of a write on some file systems (journal-less ext4
// skips every recently freed inode on each creation: hundreds of microseconds while files come
// and go); naming one is a link. Only an owner's handle keeps one, one that has prepared a start
// ([Txn.PrepareAppend]): a process that writes once would make a file only to free it at its
// exit. The spare is made after a write, off the next write's path: by the write itself once it
// has unlocked, or, after a start's append, which the start waits for, in the background. A spare
// has no name until a write under the lock gives it one, so that every named temporary file still
// belongs to a lock holder (see removeStaleTemps), and an owner that dies leaves nothing: the
// kernel frees an unnamed file with its last descriptor.

// newTemp returns the temporary file of a write: the handle's spare, named now, or a new file.
// The caller holds the lock.
func (l *Ledger) newTemp(size int64) (*os.File, error) {
	if s, reserved, written := l.takeSpare(); s != nil {
		var err error
		if written > 0 { // filled for a start (see fillSpare): this write writes all from the start
			if err = s.Truncate(0); err == nil {
				reserved = 0 // truncating freed what was reserved
			}
		}
		var f *os.File
		if err == nil {
			f, err = nameSpare(s, l.path)
		}
		s.Close()
		if err == nil {
			if size > reserved {
				preallocate(f, size)
			}
			return f, nil
		}
	}
	return createTemp(l.path, size)
}

// takeSpare returns the spare, the size reserved on disk for it and the bytes written in it, or
// nil.
func (l *Ledger) takeSpare() (*os.File, int64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takeSpareLocked()
}

func (l *Ledger) takeSpareLocked() (*os.File, int64, int64) {
	s, reserved, written := l.spare, l.spareSize, l.spareLen
	l.spare, l.spareSize, l.spareLen = nil, 0, 0
	l.filled, l.filledRows = nil, nil
	return s, reserved, written
}

// fillSpare writes into the spare of an owner's handle what its next start's write would write
// first: the array's opening and the rows of the handle's snapshot that the start keeps (those
// of this boot, see PrepareAppend). The start then finds its write prepared (see
// [Txn.TryPrepared]) while the ledger is still the snapshot's file, as it is unless another
// process wrote since: no read, no write, no goroutine beside its child's exec, only the spare's
// link. The rows are encoded under the handle's mutex, which keeps the snapshot's buffer from
// being given back meanwhile; the spare is the filler's alone while it is written.
func (l *Ledger) fillSpare() {
	l.mu.Lock()
	s, sp := l.last, l.spare
	if !l.starts || s == nil || sp == nil || l.filled == s {
		l.mu.Unlock()
		return
	}
	var rep Report
	rows := prune(slices.Clone(s.rows), &rep, false)
	rows = slices.DeleteFunc(rows, func(r Row) bool { return slices.ContainsFunc(l.dropping, r.Same) })
	var buf bytes.Buffer
	err := encodeOpen(&buf, rows)
	_, reserved, written := l.takeSpareLocked()
	l.mu.Unlock()
	if err == nil {
		_, err = sp.WriteAt(buf.Bytes(), 0)
	}
	if n := int64(buf.Len()); err == nil && written > n {
		err = sp.Truncate(n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || l.spare != nil { // a spare whose content is unknown is let go
		sp.Close()
		return
	}
	l.spare, l.spareSize, l.spareLen = sp, reserved, int64(buf.Len())
	if l.last == s { // still the handle's snapshot: the rows, aliasing its buffer, are its own
		l.filled, l.filledRows, l.filledPruned = s, rows, rep.Pruned
	}
}

// refillSpare makes the handle's spare if it has none. A directory where one cannot be made (no
// O_TMPFILE there, or not Linux) is not tried again by this handle.
func (l *Ledger) refillSpare() {
	l.mu.Lock()
	if l.spare != nil || l.making || l.noSpare {
		l.mu.Unlock()
		return
	}
	l.making = true
	// Room for the file last written and one more row, reserved now rather than by the write
	// (see preallocate).
	var size int64
	if l.last != nil {
		size = l.last.fi.Size() + rowRoom
	}
	l.mu.Unlock()
	s, err := makeSpare(l.path)
	if err == nil {
		preallocate(s, size)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.making = false
	if err != nil {
		l.noSpare = true
		return
	}
	if l.spare != nil {
		s.Close()
		return
	}
	l.spare, l.spareSize = s, size
}

// StartsDone tells the handle that its owner starts no more children. A spare made after a write
// is for a next start (see newTemp), so none is made from now on; one the handle has still serves
// its next write. custody run tells it once its one child runs: the drop of the child's row would
// otherwise make a spare, and the handle's Close free it, 0.15 ms here on the way to its exit.
// A later start makes the handle an owner's again.
func (l *Ledger) StartsDone() {
	l.mu.Lock()
	l.starts = false
	l.mu.Unlock()
}

// afterWrite makes and fills the spare of an owner's handle once a write other than a start's
// append has unlocked (a start's append leaves it to its background).
func (l *Ledger) afterWrite() {
	l.mu.Lock()
	owner := l.starts
	l.mu.Unlock()
	if owner {
		l.refillSpare()
		l.fillSpare()
	}
}

// background finishes a start's append off the start's path, in one goroutine: it unlocks, closes
// the replaced file (see releaseReplaced), decodes and keeps the new snapshot (when snap is not
// nil, from its row kept on: see Txn.finish) and makes and fills the next spare. One goroutine
// rather than one for each: on a machine with few CPUs, each goroutine started where a CPU idles
// wakes a thread, which costs the starter microseconds.
func (l *Ledger) background(unlock func(), replaced *os.File, snap *snapshot, kept int) {
	done := make(chan struct{})
	l.mu.Lock()
	l.tail = done
	l.mu.Unlock()
	go func() {
		defer close(done)
		unlock()
		if replaced != nil {
			replaced.Close()
		}
		if snap != nil {
			l.keepDecoded(snap, kept)
		}
		l.refillSpare()
		l.fillSpare()
	}()
}

// awaitTail waits for the last append's background to end.
func (l *Ledger) awaitTail() {
	l.mu.Lock()
	done := l.tail
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}

// closeSpare lets go of the spare; the kernel frees it.
func (l *Ledger) closeSpare() {
	if s, _, _ := l.takeSpare(); s != nil {
		s.Close()
	}
}

func spareError(op string, err error) error {
	return fmt.Errorf("write ledger: spare: %s: %w", op, err)
}
