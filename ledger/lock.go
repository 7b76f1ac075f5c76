package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gofrs/flock"
)

// DefaultLockTimeout bounds the wait for the ledger lock. A write holds it for a few
// milliseconds, so waiting this long means the holder is stalled, not busy.
const DefaultLockTimeout = 3 * time.Second

// LockedError reports that the lock was not acquired within the timeout; nothing was written.
type LockedError struct {
	Path    string
	Waited  time.Duration
	Holder  int    // PID holding the lock, 0 when it cannot be told
	Stopped bool   // the holder is stopped (SIGSTOP, a debugger)
	State   string // the holder's scheduler state as the OS reports it, when known
}

func (e *LockedError) Error() string {
	who := "another process"
	if e.Holder > 0 {
		who = fmt.Sprintf("pid %d", e.Holder)
		if e.Stopped {
			who += " (stopped)"
		}
	}
	return fmt.Sprintf("lock %s: held by %s for over %v: gave up, nothing written", e.Path, who, e.Waited.Round(time.Millisecond))
}

// IsLocked reports whether err is a lock timeout.
func IsLocked(err error) bool {
	_, ok := errors.AsType[*LockedError](err)
	return ok
}

// lock takes the exclusive lock on path, polling with a short backoff for at most timeout, and
// returns its undo. Polling rather than a blocking flock(2) lets the wait end: a blocked flock can
// only be interrupted by a signal.
func lock(ctx context.Context, path string, timeout time.Duration) (unlock func(), err error) {
	return lockAs(ctx, path, timeout, false)
}

// lockAs is lock, shared when shared is true (readers on Windows, see readersLock).
func lockAs(ctx context.Context, path string, timeout time.Duration, shared bool) (unlock func(), err error) {
	// Not following a symbolic link: one planted at the lock's name would otherwise make custody
	// create or lock a file wherever it points.
	fl := flock.New(path, flock.SetPermissions(0o600), flock.SetFlag(os.O_CREATE|os.O_RDWR|openFlags))
	try := fl.TryLock
	if shared {
		try = fl.TryRLock
	}
	if err := pollLock(ctx, path, timeout, try); err != nil {
		fl.Close()
		return nil, err
	}
	return checkLocked(fl)
}

// pollLock calls try, which attempts the lock without waiting, with a short backoff until it
// succeeds, fails, timeout passes (a *LockedError) or ctx ends.
func pollLock(ctx context.Context, path string, timeout time.Duration, try func() (bool, error)) error {
	start := time.Now()
	deadline := start.Add(timeout)
	delay := 100 * time.Microsecond
	for {
		ok, err := try()
		if err != nil {
			return fmt.Errorf("lock %s: %w", path, err)
		}
		if ok {
			return nil
		}
		if !time.Now().Before(deadline) {
			return lockedError(path, time.Since(start))
		}
		t := time.NewTimer(min(delay, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, time.Millisecond)
	}
}

// checkLocked checks the lock file just locked, through its descriptor: the check before the open
// cannot see a file swapped in after it.
func checkLocked(fl *flock.Flock) (unlock func(), err error) {
	fi, err := fl.Stat()
	if err == nil {
		err = checkFileInfo(fl.Path(), fi)
	}
	if err != nil {
		fl.Unlock()
		fl.Close()
		return nil, err
	}
	return func() { fl.Unlock() }, nil
}

func lockedError(path string, waited time.Duration) *LockedError {
	e := &LockedError{Path: path, Waited: waited}
	e.Holder, e.State = lockHolder(path)
	e.Stopped = e.State == "T" || e.State == "t"
	return e
}
