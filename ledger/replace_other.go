//go:build !windows

package ledger

import (
	"os"
	"syscall"
)

// readersLock says whether readers take the lock, shared, before they read: on POSIX a rename
// replaces a file that readers hold open, so they need none.
const readersLock = false

// holdFiles says whether a writer may keep a ledger file open through a rename over it (see
// releaseReplaced and snapshot): POSIX lets a rename replace an open file.
const holdFiles = true

// rename is rename(2) itself. os.Rename lstats newpath first, to refuse replacing a directory;
// the writer has just checked that the ledger is the regular file it read (checkUnchanged), and
// rename(2) refuses a directory anyway (EISDIR), so that lstat would only add a system call to
// every write.
func rename(oldpath, newpath string) error {
	if err := syscall.Rename(oldpath, newpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

// readAll reads the ledger; with hold it returns the file still open, for the writer to release
// after its rename (see releaseReplaced).
func readAll(path string, buf []byte, hold bool) ([]byte, *os.File, error) {
	return readInto(path, buf, hold)
}
