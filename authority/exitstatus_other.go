//go:build !linux

package authority

import "context"

// exitStatus: macOS tells no process but the parent how another ended, and custody's Windows
// processes are its own children or jobs' members, whose codes os/exec reports.
func (p *Process) exitStatus(context.Context) (ExitStatus, error) {
	return ExitStatus{}, ErrNoExitStatus
}
