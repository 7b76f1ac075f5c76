//go:build !linux

package sdunit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// Conn is a connection to a systemd user manager; there is none on this OS.
type Conn struct{}

func dial(context.Context) (*Conn, error) {
	return nil, fmt.Errorf("sdunit: systemd on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func address() (string, error) {
	return "", fmt.Errorf("sdunit: systemd on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func (c *Conn) close() {}

func (c *Conn) startScope(context.Context, string, int) error { return errors.ErrUnsupported }

func (c *Conn) startService(context.Context, string, []string, []string) error {
	return errors.ErrUnsupported
}

func (c *Conn) delegated(context.Context, string) (bool, error) { return false, errors.ErrUnsupported }

func (c *Conn) stop(context.Context, string) error { return errors.ErrUnsupported }
