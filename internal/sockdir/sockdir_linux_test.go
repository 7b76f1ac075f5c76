package sockdir_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/sockdir"
	"github.com/custody-dev/custody/internal/testproc"
)

// mkdir makes the directory name in tmp with mode, whatever the umask.
func mkdir(t *testing.T, tmp, name string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(tmp, name)
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// flockDir takes how on the directory dir through a descriptor the test holds until it ends, or
// until the returned function closes it.
func flockDir(t *testing.T, dir string, how int) func() {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

// A sweep removes only this user's directories of mode 0700 with the prefix that nobody locks,
// holding at most a socket that nothing listens on.
func TestSweep(t *testing.T) {
	tmp := testproc.TempDir(t)
	sock := func(dir string, live bool) {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		if live {
			t.Cleanup(func() { ln.Close() })
			return
		}
		ln.SetUnlinkOnClose(false) // what a killed listener leaves
		ln.Close()
	}
	empty := mkdir(t, tmp, "custody-x-EMPTY", 0o700)
	dead := mkdir(t, tmp, "custody-x-DEAD", 0o700)
	sock(dead, false)
	locked := mkdir(t, tmp, "custody-x-LOCKED", 0o700)
	flockDir(t, locked, syscall.LOCK_SH)
	earlier := mkdir(t, tmp, "custody-x-EARLIER", 0o700) // an earlier custody's listener: no lock
	sock(earlier, true)
	open := mkdir(t, tmp, "custody-x-OPEN", 0o755)
	full := mkdir(t, tmp, "custody-x-FULL", 0o700)
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	notSock := mkdir(t, tmp, "custody-x-NOTSOCK", 0o700)
	if err := os.WriteFile(filepath.Join(notSock, "s"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := mkdir(t, tmp, "custody-other", 0o700)
	keep := mkdir(t, tmp, "custody-x-KEEP", 0o700)
	link := filepath.Join(tmp, "custody-x-LINK")
	if err := os.Symlink(empty, link); err != nil {
		t.Fatal(err)
	}

	removed := sockdir.Sweep(tmp, "custody-x-", filepath.Base(keep))
	slices.Sort(removed)
	if want := []string{dead, empty}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, p := range []string{locked, earlier, open, full, notSock, other, keep, link} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
	for _, p := range []string{dead, empty} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it removed", p, err)
		}
	}
}

// A sweep of a temporary directory that holds many files makes no string for each: a supervisor
// sweeps, and runs with the collector off.
func TestSweepAllocates(t *testing.T) {
	tmp := testproc.TempDir(t)
	const files = 2000
	for i := range files {
		f, err := os.Create(filepath.Join(tmp, fmt.Sprintf("some-other-file-%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	mkdir(t, tmp, "custody-x-gone", 0o700)
	if removed := sockdir.Sweep(tmp, "custody-x-", "custody-x-keep"); len(removed) != 1 {
		t.Fatalf("removed %q, want the one directory", removed)
	}
	if n := testing.AllocsPerRun(5, func() { sockdir.Sweep(tmp, "custody-x-", "custody-x-keep") }); n > 8 {
		t.Errorf("a sweep over %d files allocates %v times, want at most 8", files, n)
	}
}

// LockDir waits while a sweeper holds its exclusive lock, and reports ErrMoved when the directory
// it opened was removed meanwhile and another made at its path; At tells a lock's directory from
// one made at its path since.
func TestLockDirMoved(t *testing.T) {
	tmp := testproc.TempDir(t)
	dir := mkdir(t, tmp, "custody-x-D", 0o700)
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	ino := st.Ino
	unlock := flockDir(t, dir, syscall.LOCK_EX) // the sweeper's
	got := make(chan error, 1)
	go func() {
		l, err := sockdir.LockDir(dir)
		l.Release()
		got <- err
	}()
	testproc.WaitFor(t, 10*time.Second, func() error { return blockedOn(dir, ino) })
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mkdir(t, tmp, "custody-x-D", 0o700)
	unlock()
	if err := <-got; !errors.Is(err, sockdir.ErrMoved) {
		t.Fatalf("LockDir of a directory replaced while it waited: %v, want %v", err, sockdir.ErrMoved)
	}

	l, err := sockdir.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if !l.At(dir) {
		t.Fatal("At: false for the directory just locked")
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mkdir(t, tmp, "custody-x-D", 0o700)
	if l.At(dir) {
		t.Fatal("At: true for a directory made at the path since")
	}
	if removed := sockdir.Sweep(tmp, "custody-x-", ""); len(removed) != 1 {
		t.Fatalf("sweep: removed %v, want the new unlocked directory", removed)
	}
}

// LockDir takes no lock on what is not this user's private directory.
func TestLockDirRefuses(t *testing.T) {
	tmp := testproc.TempDir(t)
	open := mkdir(t, tmp, "custody-x-OPEN", 0o755)
	priv := mkdir(t, tmp, "custody-x-PRIV", 0o700)
	link := filepath.Join(tmp, "custody-x-LINK")
	if err := os.Symlink(priv, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{open, link, filepath.Join(tmp, "missing")} {
		if l, err := sockdir.LockDir(p); err == nil {
			l.Release()
			t.Errorf("LockDir(%s): locked, want an error", p)
		}
	}
}

// blockedOn is nil once this process waits for a flock on the inode ino (dir's), as
// /proc/locks shows a blocked request: "N: -> FLOCK ADVISORY READ <pid> <maj>:<min>:<ino> 0 EOF".
func blockedOn(dir string, ino uint64) error {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return err
	}
	for l := range strings.Lines(string(b)) {
		f := strings.Fields(l)
		if len(f) >= 7 && f[1] == "->" && f[2] == "FLOCK" && f[5] == strconv.Itoa(os.Getpid()) &&
			strings.HasSuffix(f[6], ":"+strconv.FormatUint(ino, 10)) {
			return nil
		}
	}
	return fmt.Errorf("no flock of this process waits on %s", dir)
}

// Listen makes the directory again when the one it locked was replaced before its socket was in
// it (a sweeper removed it, and the maker's next attempt made another at the path), and returns
// a lock on the directory that holds the socket.
func TestListenAfterSweep(t *testing.T) {
	tmp := testproc.TempDir(t)
	dir := filepath.Join(tmp, "custody-x-L")
	mkdirs, listens := 0, 0
	mkdir := func() (string, error) {
		mkdirs++
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return dir, err
		}
		return dir, nil
	}
	listen := func(path string) (*net.UnixListener, error) {
		if listens++; listens == 1 { // a sweep between the lock and the socket, then a remake
			if err := os.Remove(dir); err != nil {
				return nil, err
			}
			if err := os.Mkdir(dir, 0o700); err != nil {
				return nil, err
			}
		}
		return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	}
	ln, got, l, err := sockdir.Listen(mkdir, listen)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	defer l.Release()
	if got != dir || mkdirs != 2 || listens != 2 {
		t.Errorf("Listen: dir %s after %d makings and %d listens, want %s after 2 and 2", got, mkdirs, listens, dir)
	}
	if !l.At(dir) {
		t.Error("the lock is not on the directory that holds the socket")
	}
	if removed := sockdir.Sweep(tmp, "custody-x-", ""); len(removed) > 0 {
		t.Errorf("a sweep removed %v, the directory Listen holds", removed)
	}
}
