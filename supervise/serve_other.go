//go:build !linux && !darwin

package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
)

// serve is unsupported here: Windows ties children to their owner with Job Objects
// (KILL_ON_JOB_CLOSE), and other systems lack the process-identity reads the protocol relies on.
func serve(ctx context.Context, in io.Reader, cfg Config) error {
	return fmt.Errorf("supervise: serve on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
