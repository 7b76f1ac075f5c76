//go:build !linux

package reaper

import (
	"errors"
	"fmt"
	"time"
)

// Reaper does nothing outside Linux: macOS and the BSDs have no child subreaper (orphans go to
// launchd or init, which reap them), and Windows has no zombies.
type Reaper struct{}

func start() (*Reaper, error) {
	return &Reaper{}, fmt.Errorf("reaper: child subreaper: %w", errors.ErrUnsupported)
}

func (r *Reaper) stop(time.Duration) int { return 0 }
func (r *Reaper) close()                 {}
