package procid

import (
	"errors"
	"fmt"
)

// owner is unsupported: Windows has no uids; a process's security descriptor decides who may
// open it, and OpenProcess asks it.
func owner(pid int) (UIDs, error) {
	return UIDs{}, fmt.Errorf("procid: owner of pid %d on windows: %w", pid, errors.ErrUnsupported)
}

// kernelThread reports the System process, PID 4, whose threads are the kernel's.
func kernelThread(pid int) bool { return pid == 4 }
