//go:build !linux

package procid

import (
	"errors"
	"fmt"
	"runtime"
)

// GroupHasLive needs /proc; elsewhere callers rely on kill(-pgid, 0), which counts zombies.
func GroupHasLive(pgid int) (bool, error) {
	return true, fmt.Errorf("procid: group members on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
