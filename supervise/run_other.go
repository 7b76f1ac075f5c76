//go:build !linux && !darwin

package supervise

import (
	"errors"
	"fmt"
	"runtime"
)

func run(cfg Config) error {
	return fmt.Errorf("supervise: run on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
