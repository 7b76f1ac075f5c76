//go:build linux || darwin

package caller

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/procid"
)

func parent() (*Process, error) {
	ppid := unix.Getppid()
	if ppid == 0 {
		return nil, ErrNoParent
	}
	p, err := holdParent(ppid)
	if err != nil {
		return nil, err
	}
	// The re-check: had the parent died between the first read and the handle, the PID held could
	// be a stranger's by now, or the parent's zombie; getppid names the reaper instead.
	if now := unix.Getppid(); now != ppid {
		p.Close()
		return nil, fmt.Errorf("pid %d ended before it was held (the parent is now pid %d): %w", ppid, now, procid.ErrGone)
	}
	return p, nil
}
