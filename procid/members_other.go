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

// LiveGroups needs /proc; elsewhere it returns an error wrapping [errors.ErrUnsupported].
func LiveGroups() (map[int]bool, error) {
	return nil, fmt.Errorf("procid: live groups on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
