//go:build !linux

package cli

import (
	"runtime"

	"github.com/custody-dev/custody/procid"
)

// features reports what custody uses outside Linux: process handles on Windows, start-time checks
// before each signal on macOS; on an OS where no process can be identified (the BSDs), that alone.
func features() []check {
	if err := procid.Supported(); err != nil {
		return []check{{Name: "process identity", Detail: err.Error()}}
	}
	c := check{Name: "process handles", OK: true, Detail: "signals go through a handle proven by its start time"}
	if runtime.GOOS == "darwin" {
		c = check{Name: "process handles", Detail: "none on macOS: the start time is re-checked just before each signal"}
	}
	return []check{c, containmentCheck(), bootCheck()}
}
