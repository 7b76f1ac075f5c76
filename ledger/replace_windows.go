package ledger

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// Windows differs from POSIX in two ways that matter to a lock-free reader beside a renaming
// writer:
//
//	MoveFileEx(REPLACE_EXISTING)   fails with ERROR_ACCESS_DENIED while any process holds the
//	                               target open, whatever its share mode
//	CreateFile of the ledger       fails with ERROR_SHARING_VIOLATION while it is being replaced
//
// Both last as long as one read or one rename, so both are retried with a backoff for a bounded
// time, as cmd/go's robustio does. custody's own readers also take the lock shared on Windows
// (readersLock), so they never hold the file while one of its writers renames; a foreign reader
// (Hermes) is covered by the retries.

// readersLock says whether readers take the lock, shared, before they read.
const readersLock = true

// holdFiles says whether a writer may keep a ledger file open through a rename over it: not here,
// where that rename fails.
const holdFiles = false

// retryWindow bounds the retries of one rename or read.
const retryWindow = 2 * time.Second

func transient(err error) bool {
	return errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_SHARING_VIOLATION)
}

func retry(op func() error) error {
	deadline := time.Now().Add(retryWindow)
	delay := time.Millisecond
	for {
		err := op()
		if err == nil || !transient(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay) // waits out another process's open file; there is no event to wait on
		delay = min(2*delay, 50*time.Millisecond)
	}
}

func rename(oldpath, newpath string) error {
	return retry(func() error { return os.Rename(oldpath, newpath) })
}

// readAll reads the ledger. It never holds the file open, whatever hold says: a rename over a file
// that is open fails on Windows.
func readAll(path string, buf []byte, _ bool) (data []byte, _ *os.File, err error) {
	err = retry(func() error {
		data, _, err = readInto(path, buf, false)
		return err
	})
	return data, nil, err
}
