package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxSize is the largest ledger file custody reads: 64 MiB, some 150,000 rows, where a working
// ledger holds a few thousand at most. A larger file is refused with an error wrapping
// [ErrTooLarge] rather than read: the whole file is read into memory, and a huge one (by accident,
// or planted) would exhaust it.
const MaxSize = 64 << 20

// MaxNesting is the deepest nesting of arrays and objects custody reads in a ledger: a row is an
// object in the array, two levels. The Hermes reader (Python's json) recurses once per level and
// fails with RecursionError near Python's default recursion limit of 1000, less its caller's
// frames (at 994 levels called from the top of a script), so it neither reads nor quarantines
// such a file. custody refuses a deeper file likewise, as unreadable (an error wrapping
// [ErrTooDeep]), and leaves it in place: a file both programs read as corrupt is quarantined; one
// neither can read is left for a person to look at. 900 leaves the Hermes reader's caller 90
// frames, and a file custody reads, Hermes reads too.
const MaxNesting = 900

var (
	// ErrUntrusted is wrapped by every [*TrustError].
	ErrUntrusted = errors.New("ledger: untrusted")
	// ErrTooLarge reports a ledger file above [MaxSize]; nothing was read or written.
	ErrTooLarge = errors.New("ledger: file too large")
	// ErrTooDeep reports a ledger nested deeper than [MaxNesting]: refused as unreadable, and
	// left in place, not quarantined as corrupt.
	ErrTooDeep = errors.New("ledger: nested too deep")
)

// TrustError reports a ledger file, lock file or directory that custody refuses to use. A row is a
// claim that licenses signals: whoever can write the ledger, its lock or its directory could plant
// rows naming any process, or make custody create or follow files where they point. Nothing was
// read, signalled or written.
type TrustError struct {
	Path   string // the file or directory refused
	Reason string
}

func (e *TrustError) Error() string { return fmt.Sprintf("untrusted ledger: %s: %s", e.Path, e.Reason) }

// Unwrap makes errors.Is(err, ErrUntrusted) hold.
func (e *TrustError) Unwrap() error { return ErrUntrusted }

// Trust checks, without reading or changing anything, that the ledger may be used: every verb
// calls it (through [Ledger.Rows], every write and [Peek]) before its first read. The rules:
//
//   - the ledger and its lock, where they exist, are regular files (not symbolic links, FIFOs,
//     devices or directories), owned by the caller or root and writable by nobody else;
//   - the directory is owned by the caller or root and not writable by group or others, sticky
//     or not, and every directory above it is owned by the caller or root and, when writable by
//     group or others, sticky (so nobody else can rename it away and put their own in its place);
//     symbolic links on the way are accepted only when owned by the caller or root, and the
//     directories they lead to are checked by the same rules.
//
// The same checks are made again on the descriptors custody opens (without following symbolic
// links and without blocking), so a file swapped in after this check is refused too. On Windows
// only the kinds of file are checked: ownership there is a matter of ACLs, and the default
// directory, %LocalAppData%, is the user's alone.
func (l *Ledger) Trust() error { return checkTrust(l.path) }

func checkTrust(path string) error {
	if err := checkDir(filepath.Dir(path), true); err != nil {
		return err
	}
	_, err := checkFiles(path)
	return err
}

// checkFiles checks the ledger and its lock by lstat, where they exist, and the ledger's size. It
// returns what lstat said of the lock, nil when there is none yet.
func checkFiles(path string) (lockInfo fs.FileInfo, err error) {
	for _, p := range []string{path, path + ".lock"} {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		if err := checkFileInfo(p, fi); err != nil {
			return nil, err
		}
		if p == path {
			if err := checkSize(p, fi.Size()); err != nil {
				return nil, err
			}
		} else {
			lockInfo = fi
		}
	}
	return lockInfo, nil
}

// checkFileInfo applies the rules for the ledger and its lock to one file's metadata, from lstat
// or from fstat of a descriptor just opened.
func checkFileInfo(path string, fi fs.FileInfo) error {
	switch t := fi.Mode().Type(); {
	case t&fs.ModeSymlink != 0:
		return &TrustError{Path: path, Reason: "a symbolic link"}
	case t&fs.ModeNamedPipe != 0:
		return &TrustError{Path: path, Reason: "a FIFO, not a regular file"}
	case t != 0:
		return &TrustError{Path: path, Reason: "not a regular file: " + fileType(t)}
	}
	return checkFileOwner(path, fi)
}

// fileType names a file type in words: fs.FileMode's String prints "d---------" for a directory,
// its permission bits masked off, which reads as a mode the file does not have.
func fileType(t fs.FileMode) string {
	switch {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	}
	return "of type " + strings.TrimRight(t.String(), "-")
}

// checkSize refuses a file above MaxSize.
func checkSize(path string, size int64) error {
	if size > MaxSize {
		return fmt.Errorf("%s: %d bytes, above the %d MiB limit: refusing to read it: %w",
			path, size, MaxSize>>20, ErrTooLarge)
	}
	return nil
}

// Owner returns the uid owning the ledger file: its rows may name for a signal only processes of
// that user (see stop.Options). Without a file it is the caller's uid; on Windows, -1.
func (l *Ledger) Owner() (int, error) {
	fi, err := os.Lstat(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return os.Getuid(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: owner: %w", err)
	}
	return fileOwner(fi), nil
}
