//go:build unix && !linux

package scope

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// No process descriptors here (macOS has none): every group is checked by its rule immediately
// before kill(-pgid), with the window documented in group_unix.go.

func groupSignalWorks() bool                { return false }
func openLeader(int) int                    { return -1 }
func pinLeader(procid.ID) int               { return -1 }
func provenLeader(int) int                  { return -1 }
func takeLeader(*os.Process) int            { return -1 }
func closeLeader(int)                       {}
func leaderExited(int) bool                 { return false }
func leaderID(int) (uint64, bool)           { return 0, false }
func signalByLeader(int, unix.Signal) error { return errors.ErrUnsupported }

func groupSignalError() error {
	return fmt.Errorf("scope: group signal through a process descriptor on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
