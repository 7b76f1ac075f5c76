//go:build !linux

package testproc

import (
	"errors"
	"fmt"
	"runtime"
)

// PidfdProbe is Linux's: elsewhere it returns an error wrapping errors.ErrUnsupported.
func PidfdProbe(int) error {
	return fmt.Errorf("pidfd on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
