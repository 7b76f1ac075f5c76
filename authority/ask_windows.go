package authority

import (
	"errors"
	"fmt"

	"github.com/custody-dev/custody/internal/winproc"
)

// ask posts WM_CLOSE to the process's top-level windows while the read lock keeps the handle, and
// with it the PID, pinned to the proven process.
func (p *Process) ask() (string, error) {
	p.sys.mu.RLock()
	defer p.sys.mu.RUnlock()
	if p.sys.h == 0 {
		return "", p.errClosed("ask")
	}
	if exited, _ := handleExited(p.sys.h); exited {
		return "", p.errGone("ask")
	}
	n, err := winproc.CloseWindows(p.id.PID)
	switch {
	case err != nil:
		return "", fmt.Errorf("authority: ask pid %d: %w", p.id.PID, err)
	case n == 0:
		return "", fmt.Errorf("authority: ask pid %d: it has no top-level window to close: %w", p.id.PID, errors.ErrUnsupported)
	}
	return AskWMClose, nil
}
