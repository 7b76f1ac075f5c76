//go:build !linux && !darwin

package scope

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// stray is never made here: no process's environment can be read.
type stray struct{ pid int }

func findStrays([]string, int, func(int) bool) ([]*stray, error) {
	return nil, fmt.Errorf("reading another process's environment on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func (p *stray) signal(os.Signal) error { return errors.ErrUnsupported }
func (p *stray) exited() bool           { return true }
func (p *stray) close()                 {}
