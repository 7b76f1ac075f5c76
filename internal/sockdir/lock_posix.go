//go:build linux || darwin

package sockdir

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Lock is a shared lock on a socket directory, held through an open descriptor of it.
type Lock struct{ fd int }

// LockDir takes a shared lock on the directory dir, which must be this user's with mode 0700.
// It waits while a sweeper holds its exclusive lock (for the few system calls of a removal), and
// returns an error wrapping [ErrMoved] when no directory is at dir, or the one it locked no longer
// is: a sweeper removed it.
func LockDir(dir string) (*Lock, error) {
	fd, err := openPrivate(dir)
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("%w: %w", ErrMoved, err)
	}
	if err != nil {
		return nil, err
	}
	if err := flock(fd, unix.LOCK_SH); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sockdir: lock %s: %w", dir, err)
	}
	if !stillAt(fd, dir) {
		unix.Close(fd)
		return nil, ErrMoved
	}
	return &Lock{fd: fd}, nil
}

// Release drops the lock; a nil Lock is no lock.
func (l *Lock) Release() {
	if l != nil && l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

// At reports whether the directory l locks is still the one at dir. A sweeper removes a
// directory by its path once it has found it unlocked and empty: one made at the path since
// could be removed before its socket is in it. A maker checks At once its socket is there, when
// the directory is no longer empty and no sweeper can remove it.
func (l *Lock) At(dir string) bool { return l != nil && l.fd >= 0 && stillAt(l.fd, dir) }

// Listen makes a socket directory with mkdir, which returns its path (a new one, or one it
// accepts), locks it, and listens on its socket "s" with listen. A sweeper may remove the
// directory between its making and its lock, or before the socket is in it (see [Lock.At]): it
// is made again, up to eight times. On an error, what mkdir made is left at dir for the caller.
func Listen(mkdir func() (string, error), listen func(path string) (*net.UnixListener, error)) (ln *net.UnixListener, dir string, l *Lock, err error) {
	for range 8 {
		if dir, err = mkdir(); err != nil {
			return nil, dir, nil, err
		}
		l, err = LockDir(dir)
		if errors.Is(err, ErrMoved) {
			continue
		}
		if err != nil {
			return nil, dir, nil, err
		}
		if ln, err = listen(filepath.Join(dir, "s")); err != nil {
			l.Release()
			return nil, dir, nil, err
		}
		if l.At(dir) {
			return ln, dir, l, nil
		}
		ln.Close()
		l.Release()
	}
	return nil, "", nil, fmt.Errorf("sockdir: %s removed again each time it was made", dir)
}

// openPrivate opens dir, without following a symbolic link, and checks that it is a directory
// of this user's with mode 0700: the temporary directory is everyone's, and a name another user
// took is neither locked nor removed.
func openPrivate(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "fstat", Path: dir, Err: err}
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o777 != 0o700 {
		unix.Close(fd)
		return -1, fmt.Errorf("sockdir: %s is not this user's with mode 0700", dir)
	}
	return fd, nil
}

// stillAt reports whether the directory open at fd is still the one at path.
func stillAt(fd int, path string) bool {
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Lstat(path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// flock applies how to fd, again when a signal interrupts the wait.
func flock(fd, how int) error {
	for {
		if err := unix.Flock(fd, how); err != unix.EINTR {
			return err
		}
	}
}

// Sweep removes from tmp every directory whose name starts with prefix, but keep, that nobody
// locks (see [removeIfFree]), and returns the paths it removed.
func Sweep(tmp, prefix, keep string) []string {
	var removed []string
	eachName(tmp, prefix, func(name string) {
		if name != keep {
			if path := filepath.Join(tmp, name); removeIfFree(path) {
				removed = append(removed, path)
			}
		}
	})
	return removed
}

// removeIfFree removes the directory path and its socket "s" when it is this user's with mode
// 0700, nobody locks it, and nothing listens on its socket, and reports whether it did. It holds
// an exclusive lock meanwhile, so that nobody starts listening there during the removal (one
// that then locks it finds it gone, [ErrMoved], and makes it anew). The listening check is for a
// maker of an earlier custody, which took no lock: its socket answers.
func removeIfFree(path string) bool {
	fd, err := openPrivate(path)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil { // EWOULDBLOCK: somebody holds it
		return false
	}
	if !stillAt(fd, path) {
		return false
	}
	var st unix.Stat_t
	switch err := unix.Fstatat(fd, "s", &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK:
		if listening(filepath.Join(path, "s")) {
			return false
		}
		if err := unix.Unlinkat(fd, "s", 0); err != nil && err != unix.ENOENT {
			return false
		}
	case err == nil: // not a socket: not custody's; the directory is left as it is
		return false
	}
	// Fails, and leaves the directory, if anything else is in it.
	return unix.Rmdir(path) == nil
}

// listening reports whether a process accepts connections on the Unix socket at path. A
// connection it accepts is closed unused: custody's listeners read a connection closed before
// its first line as a peer gone, which asked nothing.
func listening(path string) bool {
	c, err := net.Dial("unix", path)
	if err != nil {
		return !errors.Is(err, unix.ECONNREFUSED) && !errors.Is(err, unix.ENOENT)
	}
	c.Close()
	return true
}
