//go:build !linux

package cli

import "time"

// orphans: outside Linux there is no child subreaper (macOS, Windows); orphans go to init (or
// the system's process reaper) as always.
type orphans struct{}

func adoptOrphans() *orphans              { return &orphans{} }
func (r *orphans) stop(time.Duration) int { return 0 }
func (r *orphans) close()                 {}
