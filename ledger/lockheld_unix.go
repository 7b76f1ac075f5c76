//go:build unix

package ledger

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"

	"github.com/custody-dev/custody/internal/eintr"
	"golang.org/x/sys/unix"
)

// lockHeld takes the exclusive lock for a transaction through the descriptor the handle keeps on
// its lock file (see heldLock). lockInfo is the lstat of the lock file's path that checkFiles
// made just before, nil when there is none: the descriptor is used only while that path still
// names the file it is open on, which the lstat's checks then cover. Otherwise (the first
// transaction, a lock file removed or put in place by another, a descriptor another transaction
// of this handle has) the file is opened anew, without following a symbolic link and without
// blocking, and checked through the descriptor as lock does: a file swapped in after the lstat is
// refused too. The unlock keeps the descriptor for the next transaction.
//
// A lock file replaced between the lstat and the flock goes unseen, as it does between the open
// and the flock of a file opened each time: only a process that may write the trusted directory
// can do that.
func (l *Ledger) lockHeld(ctx context.Context, lockInfo fs.FileInfo) (unlock func(), err error) {
	path := l.path + ".lock"
	h := l.takeHeldLock()
	if h != nil && !h.is(lockInfo) {
		h.close()
		h = nil
	}
	if h == nil {
		if h, err = openHeldLock(path); err != nil {
			return nil, err
		}
	}
	err = pollLock(ctx, path, cmp.Or(l.LockTimeout, DefaultLockTimeout), func() (bool, error) {
		switch err := eintr.Ignoring(func() error { return unix.Flock(h.fd, unix.LOCK_EX|unix.LOCK_NB) }); err {
		case nil:
			return true, nil
		case unix.EWOULDBLOCK:
			return false, nil
		default:
			return false, os.NewSyscallError("flock", err)
		}
	})
	if err != nil {
		l.putHeldLock(h)
		return nil, err
	}
	return func() {
		unix.Flock(h.fd, unix.LOCK_UN)
		l.putHeldLock(h)
	}, nil
}

// openHeldLock opens (creating it, mode 0600) and checks the lock file.
func openHeldLock(path string) (*heldLock, error) {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC|openFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	// Blocking again, so that the runtime takes the file as it is (a regular file never blocks):
	// a non-blocking descriptor would make it try its poller on each new File.
	unix.SetNonblock(fd, false)
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err == nil {
		err = checkFileInfo(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &heldLock{f: f, fd: fd, fi: fi}, nil
}
