package ledger

import (
	"io/fs"
	"os"
)

// openFlags adds nothing on Windows: there is no O_NOFOLLOW, and a named pipe is not a file in
// a directory. The kinds of file are checked by lstat before each open (see [Ledger.Trust]).
const openFlags = 0

// checkFileOwner trusts the owner on Windows: ownership is a matter of ACLs there, and the
// default directory, %LocalAppData%, carries the user's own.
func checkFileOwner(string, fs.FileInfo) error { return nil }

// fileOwner is -1 on Windows, which has no uids.
func fileOwner(fs.FileInfo) int { return -1 }

// checkDir checks nothing on Windows (see checkFileOwner).
func checkDir(string, bool) error { return nil }

// checkDirExists checks nothing on Windows either, and reports whether dir exists.
func checkDirExists(dir string, _ bool) (bool, error) {
	_, err := os.Lstat(dir)
	return err == nil, nil
}
