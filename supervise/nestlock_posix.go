//go:build linux || darwin

package supervise

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A nest directory (see nestPathLocked) is locked, with flock(2), for as long as any process may
// still listen or dial there: each supervisor holds a shared lock on it from before it listens
// until it exits, and the owner holds one from its supervisor's readiness until it lets the name
// go (an idle release, Close). A directory nobody locks is garbage: its supervisor and its owner
// are both gone (killed together, say: a container's or a CI job's whole tree SIGKILLed), and no
// process will use its name again. Each supervisor that makes a nest sweeps such directories
// from the temporary directory once it is ready (sweepNestDirs). The kernel drops a process's
// locks when it dies, however it dies, so the lock is the proof no guess replaces: a directory's
// age says nothing of whether an owner still holds its name.

// nestPrefix starts the name of every nest directory.
const nestPrefix = "custody-nest-"

// nestDirLock is a shared lock on a nest directory, held through an open descriptor of it.
type nestDirLock struct{ fd int }

// supervisorNest is the lock of this supervisor's nest directory: held for the life of the
// process, and so dropped by the kernel only as it exits, after closeNest has removed the
// directory.
var supervisorNest *nestDirLock

// makeLockedNestDir makes the nest directory dir (or accepts a lost supervisor's, see
// makeNestDir) and locks it. A sweeper may remove a directory between its making and its lock
// (one a killed supervisor left, while its replacement starts): a lock taken on a directory no
// longer at dir is dropped and the directory made again.
func makeLockedNestDir(dir string) (*nestDirLock, error) {
	for range 8 {
		if err := makeNestDir(dir); err != nil {
			return nil, err
		}
		l, err := lockNestDir(dir)
		if !errors.Is(err, errNestMoved) {
			return l, err
		}
	}
	return nil, fmt.Errorf("nest directory %s: removed again each time it was made", dir)
}

// errNestMoved says that the directory locked is no longer the one at its path.
var errNestMoved = errors.New("the directory was removed or replaced while it was locked")

// lockNestDir takes a shared lock on the nest directory dir, which must be this user's with mode
// 0700. It waits while a sweeper holds its exclusive lock (for the few system calls of a removal),
// and reports errNestMoved when the directory it locked is no longer at dir: the sweeper removed it.
func lockNestDir(dir string) (*nestDirLock, error) {
	fd, err := openNestDir(dir)
	if err != nil {
		return nil, err
	}
	if err := flock(fd, unix.LOCK_SH); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock nest directory %s: %w", dir, err)
	}
	if !stillAt(fd, dir) {
		unix.Close(fd)
		return nil, errNestMoved
	}
	return &nestDirLock{fd: fd}, nil
}

// release drops the lock; nil is no lock.
func (l *nestDirLock) release() {
	if l != nil && l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

// openNestDir opens dir, without following a symbolic link, and checks that it is a directory of
// this user's with mode 0700: the temporary directory is everyone's, and a name another user took
// is neither locked nor removed.
func openNestDir(dir string) (int, error) {
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
		return -1, fmt.Errorf("nest directory %s: not this user's with mode 0700", dir)
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

// sweepNestDirs removes from tmp every nest directory that nobody locks, but own, and returns the
// paths it removed.
func sweepNestDirs(tmp, own string) []string {
	var removed []string
	eachNestName(tmp, func(name string) {
		if name != own {
			if path := filepath.Join(tmp, name); sweepNestDir(path) {
				removed = append(removed, path)
			}
		}
	})
	return removed
}

// sweepNestDir removes the nest directory path and its socket when it is this user's with mode
// 0700, nobody locks it, and nothing listens on its socket, and reports whether it did. It holds
// an exclusive lock meanwhile, so that no supervisor starts listening there during the removal
// (one that then locks it finds it gone and makes it anew). The listening check is for a
// supervisor of an earlier custody, which took no lock: its socket answers.
func sweepNestDir(path string) bool {
	fd, err := openNestDir(path)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil { // EWOULDBLOCK: a supervisor or its owner holds it
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
// connection it accepts is closed unused: a supervisor reads a closed connection as a nested
// owner gone, which registered nothing.
func listening(path string) bool {
	c, err := net.Dial("unix", path)
	if err != nil {
		return !errors.Is(err, unix.ECONNREFUSED) && !errors.Is(err, unix.ENOENT)
	}
	c.Close()
	return true
}

// sweepNestDirsAfter sweeps the nest directories beside the one at own (a socket path) and logs
// what it removed.
func sweepNestDirsAfter(own string, log *slog.Logger) {
	dir := filepath.Dir(own)
	removed := sweepNestDirs(filepath.Dir(dir), filepath.Base(dir))
	if len(removed) > 0 {
		log.Debug("supervise: removed nest directories nobody holds", "dirs", removed)
	}
}
