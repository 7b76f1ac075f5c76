package testproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/gofrs/flock"
)

// LedgerFault is a real fault of a ledger's file system, made for one test: every write to the
// ledger at the path fails, at one step or another of the write.
type LedgerFault struct {
	Name string
	// Locked reports whether the fault is a lock held by another process: a write gives up
	// waiting for it, before it reads anything.
	Locked bool
	// Make makes the fault for the ledger at path, in a directory of its own that does not exist
	// yet, and undoes what needs undoing at the test's end. It needs root.
	Make func(t testing.TB, path string)
}

// LedgerFaults lists the faults a ledger write meets in the field, each produced for real: the
// ledger is a directory, a symbolic link owned by another user, a corrupt file that cannot be
// moved aside, on a file system with no inode left for the temporary file, or with no space left
// to write it; or its lock is held.
func LedgerFaults() []LedgerFault {
	return []LedgerFault{
		{Name: "ledger is a directory", Make: func(t testing.TB, path string) {
			must(t, os.MkdirAll(path, 0o700))
		}},
		{Name: "ledger is another user's symlink", Make: func(t testing.TB, path string) {
			must(t, os.MkdirAll(filepath.Dir(path), 0o700))
			must(t, os.WriteFile(path+".real", []byte("[]\n"), 0o600))
			must(t, os.Symlink(path+".real", path))
			must(t, os.Lchown(path, 65534, 65534))
		}},
		{Name: "lock held", Locked: true, Make: func(t testing.TB, path string) {
			must(t, os.MkdirAll(filepath.Dir(path), 0o700))
			fl := flock.New(path+".lock", flock.SetPermissions(0o600))
			ok, err := fl.TryLock()
			if err != nil || !ok {
				t.Fatalf("hold the lock: %v %v", ok, err)
			}
			t.Cleanup(func() { fl.Unlock() })
		}},
		{Name: "quarantine fails", Make: func(t testing.TB, path string) {
			must(t, os.MkdirAll(filepath.Dir(path), 0o700))
			must(t, os.WriteFile(path, []byte("not json"), 0o600))
			for i := 1; i < 1000; i++ { // every name the corrupt file could be moved to is taken
				name := path + ".corrupt"
				if i > 1 {
					name += "." + strconv.Itoa(i)
				}
				must(t, os.WriteFile(name, nil, 0o600))
			}
		}},
		{Name: "no inode for the temporary file", Make: func(t testing.TB, path string) {
			mountTmpfs(t, filepath.Dir(path), "nr_inodes=16,size=1m")
			must(t, os.WriteFile(path, []byte("[]\n"), 0o600))
			must(t, os.WriteFile(path+".lock", nil, 0o600))
			fill(t, filepath.Dir(path), func(i int) error {
				return os.WriteFile(filepath.Join(filepath.Dir(path), "fill-"+strconv.Itoa(i)), nil, 0o600)
			})
		}},
		{Name: "disk full", Make: func(t testing.TB, path string) {
			mountTmpfs(t, filepath.Dir(path), "size=64k")
			must(t, os.WriteFile(path, []byte("[]\n"), 0o600))
			must(t, os.WriteFile(path+".lock", nil, 0o600))
			f, err := os.Create(filepath.Join(filepath.Dir(path), "fill"))
			must(t, err)
			defer f.Close()
			block := make([]byte, 4096)
			fill(t, filepath.Dir(path), func(int) error { _, err := f.Write(block); return err })
		}},
	}
}

// mountTmpfs mounts a tmpfs with opts (and mode 0700) on dir, which it makes, until the test ends.
func mountTmpfs(t testing.TB, dir, opts string) {
	must(t, os.MkdirAll(dir, 0o700))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700,"+opts); err != nil {
		Skip(t, "mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// fill calls add until it fails with ENOSPC.
func fill(t testing.TB, dir string, add func(i int) error) {
	for i := 0; i < 1<<20; i++ {
		err := add(i)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		must(t, err)
	}
	t.Fatalf("%s: never full", dir)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(fmt.Errorf("make ledger fault: %w", err))
	}
}
