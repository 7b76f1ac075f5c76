//go:build unix

package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// walkDir checks each component of the absolute path dir with lstat, from the root down, and
// reports whether one was a symbolic link, and whether all of them exist.
func walkDir(dir string, final bool) (linked, exists bool, err error) {
	p := "/"
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	for i, name := range parts {
		p = filepath.Join(p, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return linked, false, nil
		}
		if err != nil {
			return linked, false, fmt.Errorf("ledger directory: %w", err)
		}
		isLink, err := checkDirInfo(p, fi, final && i == len(parts)-1)
		if err != nil {
			return linked, false, err
		}
		linked = linked || isLink
	}
	return linked, true, nil
}

// checkDirInfo checks one component of the ledger directory's path.
func checkDirInfo(p string, fi fs.FileInfo, last bool) (link bool, err error) {
	st := fi.Sys().(*syscall.Stat_t)
	if !trusted(st.Uid) {
		return false, &TrustError{Path: p, Reason: fmt.Sprintf("owned by uid %d, not by uid %d or root", st.Uid, os.Getuid())}
	}
	mode := fi.Mode()
	switch {
	case mode&fs.ModeSymlink != 0:
		return true, nil
	case !mode.IsDir():
		return false, &TrustError{Path: p, Reason: "not a directory"}
	case mode.Perm()&0o022 == 0:
		return false, nil
	case last:
		return false, &TrustError{Path: p, Reason: fmt.Sprintf("directory writable by group or others (mode %s)", mode)}
	case mode&fs.ModeSticky == 0:
		return false, &TrustError{Path: p, Reason: fmt.Sprintf("directory writable by group or others without the sticky bit (mode %s)", mode)}
	}
	return false, nil
}
