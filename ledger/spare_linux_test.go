package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
)

// TestSpare: an owner's handle (one that prepared a start) makes, after the start's append, an
// unnamed file in the ledger's directory, and its next write becomes that file: the ledger is then
// the spare's inode, with the ledger's mode, and no temporary name is left. The write makes the
// next spare itself. A handle that only adds keeps none.
func TestSpare(t *testing.T) {
	ctx := context.Background()
	pool := cats(t, 2)
	l := tempLedger(t)
	defer l.Close()
	tx, err := l.LockAppend(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.PrepareAppend(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Append(rowFor(t, pool[0])); err != nil {
		t.Fatal(err)
	}
	var spare uint64
	testproc.WaitFor(t, 5*time.Second, func() error {
		if spare = ledger.SpareIno(l); spare == 0 {
			return errors.New("no spare after a start's append")
		}
		return nil
	})
	if _, err := l.Add(ctx, rowFor(t, pool[1])); err != nil {
		t.Fatal(err)
	}
	st := lstat(t, l.Path())
	if st.Ino != spare {
		t.Errorf("the ledger is inode %d after the write, not the spare %d", st.Ino, spare)
	}
	if st.Mode&0o777 != 0o600 || st.Nlink != 1 {
		t.Errorf("the ledger has mode %o and %d links, want 600 and 1", st.Mode&0o777, st.Nlink)
	}
	if rows, err := l.Rows(ctx); err != nil || len(rows) != 2 {
		t.Errorf("rows after the write: %v, %v; want 2", rows, err)
	}
	if tmps, _ := filepath.Glob(l.Path() + ".tmp-*"); len(tmps) > 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
	if next := ledger.SpareIno(l); next == 0 || next == spare {
		t.Errorf("spare after the write: inode %d (the used one %d); want a new one", next, spare)
	}

	once := ledger.Open(l.Path())
	defer once.Close()
	if _, err := once.Add(ctx, rowFor(t, pool[0])); err != nil {
		t.Fatal(err)
	}
	if ino := ledger.SpareIno(once); ino != 0 {
		t.Errorf("a handle that only adds keeps a spare (inode %d)", ino)
	}
	if _, err := os.Stat(l.Path()); err != nil {
		t.Fatal(err)
	}
}

// TestStartsDone: once told that its owner starts no more children, a handle's next write still
// becomes the spare it has, and makes none after it; a start made later anyway makes the handle an
// owner's again, which keeps one.
func TestStartsDone(t *testing.T) {
	ctx := context.Background()
	pool := cats(t, 3)
	l := tempLedger(t)
	defer l.Close()
	start := func(i int) {
		t.Helper()
		tx, err := l.LockAppend(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.PrepareAppend(); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Append(rowFor(t, pool[i])); err != nil {
			t.Fatal(err)
		}
		ledger.AwaitTail(l)
	}
	start(0)
	spare := ledger.SpareIno(l)
	if spare == 0 {
		t.Fatal("no spare after a start's append")
	}
	l.StartsDone()
	if _, err := l.Add(ctx, rowFor(t, pool[1])); err != nil {
		t.Fatal(err)
	}
	st := lstat(t, l.Path())
	if st.Ino != spare {
		t.Errorf("the write after StartsDone is inode %d, not the spare %d it had", st.Ino, spare)
	}
	if ino := ledger.SpareIno(l); ino != 0 {
		t.Errorf("a spare (inode %d) made after StartsDone", ino)
	}
	start(2)
	if ledger.SpareIno(l) == 0 {
		t.Error("no spare after a start made after StartsDone")
	}
	if rows, err := l.Rows(ctx); err != nil || len(rows) != 3 {
		t.Errorf("rows: %v, %v; want 3", rows, err)
	}
}

// lstat returns path's lstat(2), failing the test without one.
func lstat(t *testing.T, path string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st
}
