//go:build !linux

package procid

import (
	"errors"
	"fmt"
	"runtime"
)

// listPIDs has no cheap source outside Linux; Presence then probes each PID with Exists.
func listPIDs() ([]int32, error) {
	return nil, fmt.Errorf("procid: listing pids on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
