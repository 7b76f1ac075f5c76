package authority

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// exitStatus reads the exit code through the handle: GetExitCodeProcess answers any holder of a
// handle with PROCESS_QUERY_LIMITED_INFORMATION, parent or not, once the process has exited
// (before, it answers STILL_ACTIVE, which is refused here rather than taken for a code).
func (p *Process) exitStatus(context.Context) (ExitStatus, error) {
	p.sys.mu.RLock()
	defer p.sys.mu.RUnlock()
	if p.sys.h == 0 {
		return ExitStatus{}, p.errClosed("exit status")
	}
	if exited, err := handleExited(p.sys.h); err != nil || !exited {
		return ExitStatus{}, fmt.Errorf("still running: %w", errors.Join(ErrNoExitStatus, err))
	}
	var code uint32
	if err := windows.GetExitCodeProcess(p.sys.h, &code); err != nil {
		return ExitStatus{}, fmt.Errorf("%w: %v", ErrNoExitStatus, os.NewSyscallError("GetExitCodeProcess", err))
	}
	return ExitStatus{Code: int(code)}, nil
}
