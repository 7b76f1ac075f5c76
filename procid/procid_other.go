//go:build !linux && !darwin && !windows

package procid

// Elsewhere custody cannot read an incarnation: every read is an error wrapping
// errors.ErrUnsupported, so every record checks as unknown and nothing is ever killed by PID.

import (
	"errors"
	"fmt"
	"runtime"
)

// osSupported is false: see Supported.
const osSupported = false

// readChild is read: a process that exited is gone here, whoever holds it.
func readChild(pid int) (Incarnation, error) { return read(pid) }

func of(id ID) (Incarnation, error) {
	return Incarnation{}, fmt.Errorf("procid: incarnation of pid %d on %s: %w", id.PID, runtime.GOOS, errors.ErrUnsupported)
}

func read(pid int) (Incarnation, error) {
	return Incarnation{}, fmt.Errorf("procid: read pid %d on %s: %w", pid, runtime.GOOS, errors.ErrUnsupported)
}

func bootID() (string, error) {
	return "", fmt.Errorf("procid: boot id on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func selfOnce() (Incarnation, error) {
	return Incarnation{}, fmt.Errorf("procid: self on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
