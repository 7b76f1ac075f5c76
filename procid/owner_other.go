//go:build !linux && !darwin && !windows

package procid

import (
	"errors"
	"fmt"
	"runtime"
)

func owner(pid int) (UIDs, error) {
	return UIDs{}, fmt.Errorf("procid: owner of pid %d on %s: %w", pid, runtime.GOOS, errors.ErrUnsupported)
}

func kernelThread(int) bool { return false }
