//go:build !linux && !darwin

package supervise

import (
	"errors"
	"fmt"
	"runtime"
)

func ownGroup() int { return 0 }

// spawn is unsupported here: on Windows custody ties children to their owner with a Job Object
// (KILL_ON_JOB_CLOSE) instead of a supervisor process.
func (c *Client) spawn() (*proc, error) {
	return nil, fmt.Errorf("start supervisor on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// NestSocket returns "": there is no supervisor here.
func (c *Client) NestSocket() string { return "" }

func (c *Client) removeNest() {}

func removeNestDir(string) {}
