//go:build !linux && !darwin

package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
)

func runSocket(cfg Config, path string) error {
	return fmt.Errorf("supervise: run on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func serveSocket(ctx context.Context, in io.Reader, ln *net.UnixListener, cfg Config) error {
	return fmt.Errorf("supervise: serve on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
