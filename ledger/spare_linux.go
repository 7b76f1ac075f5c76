package ledger

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// makeSpare makes an unnamed file in the ledger's directory (O_TMPFILE, Linux 3.11; ext4, xfs,
// btrfs and tmpfs have it, others answer EOPNOTSUPP). Not O_EXCL: that would forbid naming it.
func makeSpare(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, spareError("open", &os.PathError{Op: "open", Path: dir, Err: err})
	}
	if err := unix.Fchmod(fd, 0o600); err != nil { // the umask may have narrowed it
		unix.Close(fd)
		return nil, spareError("chmod", err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// nameSpare links the spare s into the ledger's directory under a temporary file's name and
// returns a handle of it by that name: a duplicate of s's descriptor, not an open of the name,
// which would cost a start's write a path's look-up and could only find the same file (the
// directory is the ledger's, which only its owner and root may write, see checkDir). linkat
// through /proc/self/fd is how an unprivileged process names an O_TMPFILE file (AT_EMPTY_PATH
// needs CAP_DAC_READ_SEARCH).
func nameSpare(s *os.File, path string) (*os.File, error) {
	c, err := s.SyscallConn()
	if err != nil {
		return nil, spareError("link", err)
	}
	for range 8 {
		name := path + ".tmp-" + strconv.FormatUint(uint64(rand.Uint32()), 10)
		var linkErr, dupErr error
		dup := -1
		if err := c.Control(func(fd uintptr) {
			linkErr = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(fd)), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
			if linkErr == nil {
				dup, dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
			}
		}); err != nil {
			return nil, spareError("link", err)
		}
		if linkErr == unix.EEXIST {
			continue
		}
		if linkErr != nil {
			return nil, spareError("link", &os.LinkError{Op: "link", Old: s.Name(), New: name, Err: linkErr})
		}
		if dupErr != nil {
			os.Remove(name)
			return nil, spareError("dup", os.NewSyscallError("fcntl", dupErr))
		}
		return os.NewFile(uintptr(dup), name), nil
	}
	return nil, spareError("link", errors.New("no free temporary name"))
}
