//go:build unix

package ledger

import (
	"fmt"
	"os"
	"syscall"
)

// checkOwner refuses a ledger directory owned by another user (other than root), and a symlink to
// one: whoever controls the directory can swap the ledger under custody's rename and feed it rows
// that name processes to kill.
func checkOwner(dir string) error {
	for _, stat := range []func(string) (os.FileInfo, error){os.Lstat, os.Stat} {
		fi, err := stat(dir)
		if err != nil {
			return fmt.Errorf("ledger directory: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		if uid := os.Getuid(); int(st.Uid) != uid && st.Uid != 0 {
			return fmt.Errorf("ledger directory %s: owned by uid %d, not by uid %d: refusing to use it", dir, st.Uid, uid)
		}
	}
	return nil
}
