package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// A writer that does not take the lock (Hermes writes without it once it has waited 2 s) can
// replace the ledger while a custody writer holds the lock between its read and its rename. The
// custody rename would then put a file made from the older rows in place, and the other writer's
// row would be lost. So just before its rename a writer checks that the ledger is still the file
// it read (the same inode, size and modification time), and if it is not, reads the file in
// place again and applies its change to those rows.
//
// The check and the rename are two system calls, so a writer without the lock that renames in
// between still wins that race; the window is microseconds wide where it was the whole hold of
// the lock (a stalled writer, an owner's prepared write during a slow exec).

// errStale reports that the ledger was replaced since the transaction read it.
var errStale = errors.New("ledger replaced since it was read")

// maxMerges bounds how often one write reads the file again: a ledger replaced under the lock
// that often is being rewritten by a writer in a loop, and the write gives up rather than spin.
const maxMerges = 16

// readStat returns what identifies the file a transaction read: the stat of the descriptor it
// read through when it holds one, else pre, an lstat taken before the read (a file replaced
// between that lstat and the read then reads as stale once more, which costs a merge, never a
// row). nil means no file was there.
func readStat(held *os.File, pre os.FileInfo) os.FileInfo {
	if held != nil {
		if fi, err := held.Stat(); err == nil {
			return fi
		}
	}
	return pre
}

// lstatNow returns the ledger's lstat, or nil when it does not exist. On Windows os.SameFile
// fetches a file's id lazily, by path, at its first use: it is fetched here, at once, so that it
// is the id of the file stat'ed and not of whatever has the path by the time of the comparison.
func lstatNow(path string) (os.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	os.SameFile(fi, fi)
	return fi, nil
}

// checkUnchanged returns errStale unless the ledger at path is still the file read, as
// read describes it (nil: there was none).
func checkUnchanged(path string, read os.FileInfo) error {
	now, err := lstatNow(path)
	switch {
	case err != nil:
		return fmt.Errorf("write ledger: %w", err)
	case read == nil && now == nil:
		return nil
	case read == nil || now == nil:
		return errStale
	case !os.SameFile(read, now) || read.Size() != now.Size() || !read.ModTime().Equal(now.ModTime()):
		return errStale
	}
	return nil
}

// reread prepares the transaction again from the file in place, after errStale: its rows, its
// temporary file and its file identity are replaced, and the lock is kept.
func (tx *Txn) reread() error {
	tx.rep.Merged++
	if tx.buf != nil {
		readBufs.Put(tx.buf)
		tx.buf = nil
	}
	tx.rows = nil
	closeHeld(tx.old)
	tx.old = nil
	tx.prewritten = false
	return tx.prepare(true)
}
