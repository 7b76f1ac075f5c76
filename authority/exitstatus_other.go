//go:build !linux && !windows

package authority

import "context"

// exitStatus: macOS tells no process but the parent how another ended.
func (p *Process) exitStatus(context.Context) (ExitStatus, error) {
	return ExitStatus{}, ErrNoExitStatus
}
