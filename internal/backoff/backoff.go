// Package backoff waits for conditions the OS offers no event for, such as a process group
// becoming empty: it polls, with a delay that starts small, for a quick answer when the condition
// is about to hold, and grows, so that a long wait costs little.
package backoff

import (
	"context"
	"time"
)

// Until calls done at once, then after a delay doubling from 1 ms to 100 ms, until done reports
// true (ok) or an error (returned as it is), or ctx ends. When ctx ends, done is asked once more:
// a condition that came true as the deadline passed still counts. ok false with a nil error means
// ctx ended first.
func Until(ctx context.Context, done func() (bool, error)) (ok bool, err error) {
	delay := time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if ok, err := done(); err == nil && ok {
				return true, nil
			}
			return false, nil
		case <-t.C:
		}
		if ok, err := done(); err != nil || ok {
			return ok, err
		}
		t.Reset(delay)
		delay = min(2*delay, 100*time.Millisecond)
	}
}
