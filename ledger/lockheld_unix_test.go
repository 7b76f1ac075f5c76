//go:build unix

package ledger_test

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/ledger"
)

// TestHeldLockFollowsTheFile: a handle keeps its lock file open between writes, but locks
// through that descriptor only while the lock's path names the same file. With the lock file
// removed and a new one put in its place and held by another (an open file of its own), the
// handle's next write must wait for that holder and give up, as it would on the file it kept;
// once the holder lets go, it writes.
func TestHeldLockFollowsTheFile(t *testing.T) {
	l := tempLedger(t)
	l.LockTimeout = 100 * time.Millisecond
	pool := cats(t, 1)
	if err := register(l, pool[0], "serve"); err != nil {
		t.Fatal(err)
	}
	lock := l.Path() + ".lock"
	must(t, os.Remove(lock))
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	must(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	if err := register(l, pool[0], "serve"); !ledger.IsLocked(err) {
		t.Fatalf("a write while another holds the new lock file: got %v, want a lock timeout", err)
	}
	must(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))
	if err := register(l, pool[0], "serve"); err != nil {
		t.Fatal(err)
	}
}

// TestHeldLockOneWriteAtATime: writes through one handle from many goroutines at once each take
// the lock alone (a descriptor in use is not shared: a lock taken twice on one open file would
// not exclude), so none is lost.
func TestHeldLockOneWriteAtATime(t *testing.T) {
	l := tempLedger(t)
	pool := cats(t, 16)
	errs := make(chan error, len(pool))
	for _, pid := range pool {
		go func() { errs <- register(l, pid, "serve") }()
	}
	for range pool {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	rows, err := l.Rows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := pidsOf(rows); !slices.Equal(got, sortedPIDs(pool...)) {
		t.Fatalf("rows of %v, want %v", got, sortedPIDs(pool...))
	}
}
