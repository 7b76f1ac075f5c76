//go:build !linux

package ledger

import "os"

// preallocate does nothing here: the delayed-allocation flush it avoids is ext4's (see the Linux
// version).
func preallocate(*os.File, int64) {}
