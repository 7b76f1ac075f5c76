//go:build !windows

package ledger

import "os"

// readersLock says whether readers take the lock, shared, before they read: on POSIX a rename
// replaces a file that readers hold open, so they need none.
const readersLock = false

// holdFiles says whether a writer may keep a ledger file open through a rename over it (see
// releaseReplaced and snapshot): POSIX lets a rename replace an open file.
const holdFiles = true

func rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// readAll reads the ledger; with hold it returns the file still open, for the writer to release
// after its rename (see releaseReplaced).
func readAll(path string, buf []byte, hold bool) ([]byte, *os.File, error) {
	return readInto(path, buf, hold)
}
