//go:build unix

package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/custody-dev/custody/internal/eintr"
)

// openFlags are added to every open of the ledger and its lock. O_NOFOLLOW: a symbolic link
// planted at either name is refused (ELOOP) rather than followed, so custody never reads another
// file's rows nor creates a file where a link points. O_NONBLOCK: open(2) of a FIFO would wait
// for a writer forever; it is refused by type once open instead. It has no effect on a regular
// file.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// trusted reports whether files and directories owned by uid may hold the caller's ledger: the
// caller's own, or root's, who can do anything anyway.
func trusted(uid uint32) bool { return uid == 0 || int(uid) == os.Getuid() }

func checkFileOwner(path string, fi fs.FileInfo) error {
	st := fi.Sys().(*syscall.Stat_t)
	if !trusted(st.Uid) {
		return &TrustError{Path: path, Reason: fmt.Sprintf("owned by uid %d, not by uid %d or root", st.Uid, os.Getuid())}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return &TrustError{Path: path, Reason: fmt.Sprintf("writable by group or others (mode %04o)", perm)}
	}
	return nil
}

// fileOwner returns the uid owning fi.
func fileOwner(fi fs.FileInfo) int { return int(fi.Sys().(*syscall.Stat_t).Uid) }

// checkDir applies the directory rules (see [Ledger.Trust]) to dir and every directory above it.
// final says whether dir is the ledger's own directory, which nobody else may write even with the
// sticky bit. A directory that does not exist yet is no hazard: the check stops there.
func checkDir(dir string, final bool) error {
	_, err := checkDirExists(dir, final)
	return err
}

// checkDirExists is checkDir, and also reports whether dir exists: the check lstats every
// directory on the way, so a caller that must make a missing one need not look again.
func checkDirExists(dir string, final bool) (exists bool, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("ledger directory: %w", err)
	}
	linked, exists, err := walkDir(dir, final)
	if err != nil || !linked {
		return exists, err
	}
	// The kernel resolved those links: check the directories they lead to as well.
	real, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger directory: %w", err)
	}
	if linked, exists, err = walkDir(real, final); err == nil && linked {
		err = &TrustError{Path: dir, Reason: "its symbolic links changed while being checked"}
	}
	return exists, err
}

// walkDir checks each component of the absolute, clean path dir with lstat, from the root down,
// and reports whether one was a symbolic link, and whether all of them exist. It runs at every
// write, on the start's path: each component is a prefix of dir, and its lstat fills a Stat_t,
// with nothing allocated.
func walkDir(dir string, final bool) (linked, exists bool, err error) {
	for end := 1; end <= len(dir); end++ {
		if end < len(dir) && dir[end] != '/' {
			continue
		}
		p := dir[:end]
		var st syscall.Stat_t
		if err := eintr.Ignoring(func() error { return syscall.Lstat(p, &st) }); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return linked, false, nil
			}
			return linked, false, fmt.Errorf("ledger directory: %w", &fs.PathError{Op: "lstat", Path: p, Err: err})
		}
		isLink, err := checkDirStat(p, &st, final && end == len(dir))
		if err != nil {
			return linked, false, err
		}
		linked = linked || isLink
	}
	return linked, true, nil
}

// checkDirStat checks one component of the ledger directory's path.
func checkDirStat(p string, st *syscall.Stat_t, last bool) (link bool, err error) {
	if !trusted(st.Uid) {
		return false, &TrustError{Path: p, Reason: fmt.Sprintf("owned by uid %d, not by uid %d or root", st.Uid, os.Getuid())}
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		return true, nil
	case syscall.S_IFDIR:
	default:
		return false, &TrustError{Path: p, Reason: "not a directory"}
	}
	switch {
	case st.Mode&0o022 == 0:
		return false, nil
	case last:
		return false, &TrustError{Path: p, Reason: fmt.Sprintf("directory writable by group or others (mode %s)", dirMode(st))}
	case st.Mode&syscall.S_ISVTX == 0:
		return false, &TrustError{Path: p, Reason: fmt.Sprintf("directory writable by group or others without the sticky bit (mode %s)", dirMode(st))}
	}
	return false, nil
}

// dirMode is a directory's mode as fs.FileInfo gives it, for messages.
func dirMode(st *syscall.Stat_t) fs.FileMode {
	mode := fs.ModeDir | fs.FileMode(st.Mode&0o777)
	for bit, m := range map[uint32]fs.FileMode{syscall.S_ISVTX: fs.ModeSticky, syscall.S_ISGID: fs.ModeSetgid, syscall.S_ISUID: fs.ModeSetuid} {
		if uint32(st.Mode)&bit != 0 {
			mode |= m
		}
	}
	return mode
}
