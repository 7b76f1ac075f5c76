//go:build !linux

package procid

import (
	"errors"
	"fmt"
	"runtime"
)

// Cmdline is implemented on Linux only; elsewhere rows record no argv.
func Cmdline(pid int) ([]string, error) {
	return nil, fmt.Errorf("procid: cmdline on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
