//go:build !linux && !darwin && !windows

package caller

import (
	"errors"
	"fmt"
	"runtime"
)

type sysProcess struct{}

func parent() (*Process, error) {
	return nil, fmt.Errorf("on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func open(int) (*Process, error) {
	return nil, fmt.Errorf("on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func (sysProcess) close() error { return nil }
