//go:build !linux

package cli

import (
	"context"
	"errors"

	"github.com/custody-dev/custody/internal/caller"
)

// needsService: only Linux has systemd services (see run_systemd_linux.go).
func needsService() bool { return false }

func runInService(context.Context, *runOptions, string, *caller.Process) error {
	return errors.ErrUnsupported
}
