//go:build !linux

package scope

import (
	"errors"
	"fmt"
	"runtime"
)

func cgroupVia() string { return "" }

func delegation() (string, error) {
	return "", fmt.Errorf("scope: systemd delegation on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func needsService() error { return nil }
