//go:build !linux

package authority

import (
	"errors"
	"fmt"
	"runtime"
)

func pidfdError() error {
	return fmt.Errorf("authority: pidfd on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
