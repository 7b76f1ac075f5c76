//go:build !linux

package authority

import (
	"errors"
	"fmt"
	"os"
)

// signalGroup has no handle to go through here: macOS has no pidfd, and Windows no process
// groups to signal.
func (p *Process) signalGroup(os.Signal) error {
	return fmt.Errorf("authority: signal group of pid %d through a handle: %w", p.id.PID, errors.ErrUnsupported)
}
