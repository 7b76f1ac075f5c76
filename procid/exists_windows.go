package procid

import (
	"errors"

	"golang.org/x/sys/windows"
)

// exists opens the process: no process object proves absence, and so does an opened process that
// has exited (it lingers while some handle holds it, its PID unreusable until then). A refused
// open (another user's or a protected process) or a failed query proves nothing: true.
func exists(pid int) bool {
	h, synced, err := open(pid)
	if err != nil {
		return !errors.Is(err, ErrGone)
	}
	defer windows.CloseHandle(h)
	gone, err := exited(h, synced)
	return err != nil || !gone
}
