//go:build unix

package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
)

// stranger is a uid no test process runs as: files chowned to it belong to "another user".
const stranger = 65534

// trustCase plants one hazard next to a working ledger (one row) and names the path refused.
type trustCase struct {
	name  string
	plant func(t *testing.T, path string) (refused string)
}

var trustCases = []trustCase{
	{"directory writable by others", func(t *testing.T, path string) string {
		must(t, os.Chmod(filepath.Dir(path), 0o777))
		return filepath.Dir(path)
	}},
	{"directory sticky and writable by others", func(t *testing.T, path string) string {
		must(t, os.Chmod(filepath.Dir(path), 0o777|fs.ModeSticky))
		return filepath.Dir(path)
	}},
	{"directory writable by group", func(t *testing.T, path string) string {
		must(t, os.Chmod(filepath.Dir(path), 0o770))
		return filepath.Dir(path)
	}},
	{"directory of another user", func(t *testing.T, path string) string {
		must(t, os.Chown(filepath.Dir(path), stranger, stranger))
		return filepath.Dir(path)
	}},
	{"parent writable by others without the sticky bit", func(t *testing.T, path string) string {
		parent := filepath.Dir(filepath.Dir(path))
		must(t, os.Chmod(parent, 0o777))
		return parent
	}},
	{"ledger of another user", func(t *testing.T, path string) string {
		must(t, os.Chown(path, stranger, stranger))
		return path
	}},
	{"ledger writable by others", func(t *testing.T, path string) string {
		must(t, os.Chmod(path, 0o666))
		return path
	}},
	{"ledger is a symbolic link", func(t *testing.T, path string) string {
		real := filepath.Join(filepath.Dir(path), "elsewhere.json")
		must(t, os.Rename(path, real))
		must(t, os.Symlink(real, path))
		return path
	}},
	{"lock of another user", func(t *testing.T, path string) string {
		must(t, os.Chown(path+".lock", stranger, stranger))
		return path + ".lock"
	}},
	{"lock is a symbolic link", func(t *testing.T, path string) string {
		must(t, os.Remove(path+".lock"))
		must(t, os.Symlink(filepath.Join(filepath.Dir(path), "planted"), path+".lock"))
		return path + ".lock"
	}},
	{"lock is a FIFO", func(t *testing.T, path string) string {
		must(t, os.Remove(path+".lock"))
		must(t, syscall.Mkfifo(path+".lock", 0o600))
		return path + ".lock"
	}},
	{"ledger is a FIFO", func(t *testing.T, path string) string {
		must(t, os.Remove(path))
		must(t, syscall.Mkfifo(path, 0o600))
		return path
	}},
}

// TestTrust: with any hazard planted, every entry point (a read, a write, a peek) refuses with a
// *TrustError naming the refused path, promptly (a FIFO does not block it), and leaves every file
// as it was; a symbolic link at the lock's name creates nothing where it points.
func TestTrust(t *testing.T) {
	testproc.RequireRoot(t) // chown to another uid
	pool := cats(t, 1)
	for _, tc := range trustCases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(testproc.TempDir(t), "shared", "state", "spawn-ledger.json")
			l := ledger.Open(path)
			if err := register(l, pool[0], "serve"); err != nil {
				t.Fatal(err)
			}
			refused := tc.plant(t, path)
			before := tree(t, filepath.Dir(filepath.Dir(path)))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard only
			defer cancel()
			for name, op := range map[string]func() error{
				"rows":  func() error { _, err := l.Rows(ctx); return err },
				"add":   func() error { return register(l, pool[0], "serve") },
				"peek":  func() error { _, err := ledger.Peek(path); return err },
				"trust": l.Trust,
			} {
				err := returns(t, ctx, op)
				te, ok := errors.AsType[*ledger.TrustError](err)
				if !ok || !errors.Is(err, ledger.ErrUntrusted) {
					t.Fatalf("%s: got %v, want a *TrustError", name, err)
				}
				if te.Path != refused {
					t.Errorf("%s: refused %s, want %s (%v)", name, te.Path, refused, err)
				}
			}
			if after := tree(t, filepath.Dir(filepath.Dir(path))); !slices.Equal(before, after) {
				t.Errorf("files changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// TestTrustAccepts: the ordinary cases stay usable: a sticky world-writable directory above the
// ledger's own (as /tmp is), a root-owned ledger, and symbolic links owned by the caller on the way
// to a trusted directory.
func TestTrustAccepts(t *testing.T) {
	pool := cats(t, 1)
	base := testproc.TempDir(t)
	must(t, os.Chmod(base, 0o777|fs.ModeSticky))
	real := filepath.Join(base, "real")
	must(t, os.Mkdir(real, 0o700))
	must(t, os.Symlink(real, filepath.Join(base, "link")))
	l := ledger.Open(filepath.Join(base, "link", "state", "spawn-ledger.json"))
	if err := register(l, pool[0], "serve"); err != nil {
		t.Fatal(err)
	}
	if rows, err := l.Rows(context.Background()); err != nil || len(rows) != 1 {
		t.Fatalf("rows %v, %v; want one row", rows, err)
	}
}

// TestTrustLinks: a symbolic link on the way to the ledger's directory is refused when another
// user owns it, and the directories it leads to are checked as well.
func TestTrustLinks(t *testing.T) {
	testproc.RequireRoot(t) // lchown to another uid
	base := testproc.TempDir(t)
	real := filepath.Join(base, "real")
	must(t, os.Mkdir(real, 0o700))
	theirs := filepath.Join(base, "theirs")
	must(t, os.Symlink(real, theirs))
	must(t, os.Lchown(theirs, stranger, stranger))
	open := filepath.Join(base, "open") // writable by all, no sticky bit
	must(t, os.Mkdir(open, 0o777))
	must(t, os.Chmod(open, 0o777))
	must(t, os.Mkdir(filepath.Join(open, "dir"), 0o700))
	into := filepath.Join(base, "into")
	must(t, os.Symlink(filepath.Join(open, "dir"), into))
	for link, refused := range map[string]string{theirs: theirs, into: open} {
		err := ledger.Open(filepath.Join(link, "spawn-ledger.json")).Trust()
		if te, ok := errors.AsType[*ledger.TrustError](err); !ok || te.Path != refused {
			t.Errorf("through %s: %v; want %s refused", link, err, refused)
		}
	}
}

// TestSizeCap: a ledger above MaxSize (a sparse 3 GB file: no disk used) is refused with
// ErrTooLarge before it is read, by readers and writers alike, and stays as it was.
func TestSizeCap(t *testing.T) {
	l := tempLedger(t)
	must(t, os.MkdirAll(filepath.Dir(l.Path()), 0o700))
	f, err := os.OpenFile(l.Path(), os.O_CREATE|os.O_WRONLY, 0o600)
	must(t, err)
	must(t, f.Truncate(3<<30))
	must(t, f.Close())
	pool := cats(t, 1)
	for name, op := range map[string]func() error{
		"rows": func() error { _, err := l.Rows(context.Background()); return err },
		"add":  func() error { return register(l, pool[0], "serve") },
		"peek": func() error { _, err := ledger.Peek(l.Path()); return err },
	} {
		if err := op(); !errors.Is(err, ledger.ErrTooLarge) {
			t.Errorf("%s: got %v, want ErrTooLarge", name, err)
		}
	}
	if fi, err := os.Stat(l.Path()); err != nil || fi.Size() != 3<<30 {
		t.Errorf("ledger after: %v, %v; want it untouched", fi, err)
	}
}

// TestStaleTempsLiteral: a writer clears its own ledger's dead temporary files, matching the name
// literally: a ledger in a directory named "[ab]" or "*" leaves the temporary files of the ledgers
// in "a" and "b" alone.
func TestStaleTempsLiteral(t *testing.T) {
	pool := cats(t, 1)
	base := testproc.TempDir(t)
	var others []string
	for _, d := range []string{"a", "b"} {
		must(t, os.Mkdir(filepath.Join(base, d), 0o700))
		tmp := filepath.Join(base, d, "spawn-ledger.json.tmp-123")
		must(t, os.WriteFile(tmp, nil, 0o600))
		others = append(others, tmp)
	}
	for _, d := range []string{"[ab]", "*"} {
		l := ledger.Open(filepath.Join(base, d, "spawn-ledger.json"))
		own := l.Path() + ".tmp-456"
		must(t, os.MkdirAll(filepath.Dir(own), 0o700))
		must(t, os.WriteFile(own, nil, 0o600))
		if err := register(l, pool[0], "serve"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(own); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: its own stale temporary file: %v, want it removed", d, err)
		}
		for _, o := range others {
			if _, err := os.Stat(o); err != nil {
				t.Errorf("ledger in %s removed %s: %v", d, o, err)
			}
		}
	}
}

// returns runs op and returns its error, failing the test if it does not return before ctx ends
// (a FIFO opened for reading would block forever).
func returns(t *testing.T, ctx context.Context, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatal("blocked")
		return nil
	}
}

// tree lists every name under dir with its mode, owner and size.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		out = append(out, fmt.Sprintf("%s %v %d %d", p, fi.Mode(), st.Uid, fi.Size()))
		return nil
	})
	must(t, err)
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
