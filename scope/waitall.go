package scope

import (
	"context"
	"time"
)

// pollAll is WaitAll by asking each scope in turn, rounds 1 ms apart at first and 10 ms at most.
// One Wait per scope in turn would cost each its own wake-up.
func pollAll(ctx context.Context, ss []*Scope) []*Scope {
	waiting, unknown := sortOut(ss, nil)
	t := time.NewTimer(0)
	defer t.Stop()
	for delay := time.Millisecond; len(waiting) > 0 && ctx.Err() == nil; delay = min(2*delay, 10*time.Millisecond) {
		t.Reset(delay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		waiting, unknown = sortOut(waiting, unknown)
	}
	return append(unknown, waiting...)
}

// sortOut asks each scope in ss once whether it is empty, and returns those still populated,
// and unknown with those that could not tell appended.
func sortOut(ss, unknown []*Scope) (populated, _ []*Scope) {
	for _, s := range ss {
		switch empty, err := s.Empty(); {
		case err != nil:
			unknown = append(unknown, s)
		case !empty:
			populated = append(populated, s)
		}
	}
	return populated, unknown
}
