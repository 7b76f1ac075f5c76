package ledger

import (
	"cmp"
	"context"
	"io/fs"
)

// lockHeld takes a transaction's lock as lock does: Windows locks through the file handle each
// time (LockFileEx), and the handle keeps none.
func (l *Ledger) lockHeld(ctx context.Context, _ fs.FileInfo) (unlock func(), err error) {
	return lock(ctx, l.path+".lock", cmp.Or(l.LockTimeout, DefaultLockTimeout))
}
