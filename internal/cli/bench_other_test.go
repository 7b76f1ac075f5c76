//go:build unix && !linux

package cli_test

import (
	"testing"
	"time"
)

// timeThread runs fn and returns its wall time, which stands for CPU time too: macOS has no
// per-thread usage through getrusage.
func timeThread(_ *testing.B, fn func()) (wall, cpu time.Duration) {
	t0 := time.Now()
	fn()
	wall = time.Since(t0)
	return wall, wall
}
