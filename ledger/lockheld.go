package ledger

import (
	"io/fs"
	"os"
)

// heldLock is a handle's descriptor on its lock file, kept open from one transaction to the next
// (Unix): a transaction then takes the lock with one flock(2), where opening the file, checking
// it and closing it again cost an owner's start three more system calls and the runtime's own
// handling of a new file (see lockHeld). Each transaction has it alone: a lock taken twice on one
// open file is not exclusive, so a transaction that finds it in use opens a file of its own.
type heldLock struct {
	f  *os.File
	fd int
	fi fs.FileInfo // from fstat at the open: the file the descriptor is on
}

// takeHeldLock takes the handle's held lock file, or returns nil when there is none or another
// transaction has it.
func (l *Ledger) takeHeldLock() *heldLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held
	l.held = nil
	return h
}

// putHeldLock gives h back to the handle once its transaction has unlocked it, or closes it when
// the handle holds another.
func (l *Ledger) putHeldLock(h *heldLock) {
	l.mu.Lock()
	if l.held == nil {
		l.held, h = h, nil
	}
	l.mu.Unlock()
	h.close()
}

func (h *heldLock) close() {
	if h != nil {
		h.f.Close()
	}
}

// is reports whether lockInfo, the lstat of the lock file's path made just before, names the file
// h is open on.
func (h *heldLock) is(lockInfo fs.FileInfo) bool {
	return lockInfo != nil && os.SameFile(h.fi, lockInfo)
}
