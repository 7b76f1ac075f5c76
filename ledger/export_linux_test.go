package ledger

import "syscall"

// SpareIno returns the inode number of the handle's spare file, or 0 when it has none.
func SpareIno(l *Ledger) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare == nil {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(l.spare.Fd()), &st); err != nil {
		return 0
	}
	return st.Ino
}

// AwaitTail waits for the last start's append to finish in the background.
func AwaitTail(l *Ledger) { l.awaitTail() }

// AwaitSpare waits for DropSoon's fill of the spare.
func AwaitSpare(l *Ledger) { l.refills.Wait() }
