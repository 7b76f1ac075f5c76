package custody

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"

	"github.com/custody-dev/custody/stop"
)

// ErrFenced is wrapped by the error [Slot.Replace] returns while an earlier generation's exit is
// unproven.
var ErrFenced = errors.New("custody: slot fenced")

// FencedError says which generation fences a slot, and what its stop reported.
type FencedError struct {
	Generation int
	PID        int
	Result     stop.Result
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("custody: slot fenced: generation %d (pid %d) not seen to exit (%s: %s); no new generation starts until it is",
		e.Generation, e.PID, e.Result.Outcome, e.Result.Reason)
}

func (e *FencedError) Unwrap() error { return ErrFenced }

// Slot is a restartable child: a backend replaced on update, a server restarted on a config
// change. Each start is a generation, numbered from 1 and recorded in its ledger row. The slot is
// a barrier: generation N+1 starts only once N's exit is proven (its leader seen to exit and its
// scope empty), so two generations never run at once. If N's stop times out, the slot stays
// fenced, and every Replace fails with a [*FencedError], until N's exit is observed.
//
// The zero Slot is ready to use: it starts its generations through a zero [Owner] of its own.
type Slot struct {
	Owner   *Owner // starts the generations; nil means a zero Owner, made at the first Replace
	Purpose string
	Stop    StopOptions // how a generation is stopped

	mu     sync.Mutex
	gen    int
	cur    *Child
	fenced *Child
	last   stop.Result // the stop that fenced the slot
	// stopped is what the stop of the generation before the current one reported, forced or not
	stopped stop.Result
}

// Replace stops the current generation, if any, and starts cmd as the next one. It returns the new
// child, or an error wrapping [ErrFenced] when the previous generation's exit is unproven, or the
// error of releasing a fenced generation seen gone since (the fence is then down, and the next
// Replace goes ahead).
func (s *Slot) Replace(ctx context.Context, cmd *exec.Cmd) (*Child, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Owner == nil {
		s.Owner = &Owner{}
	}
	if err := s.unfenceLocked(ctx); err != nil {
		return nil, err
	}
	s.stopped = stop.Result{}
	if s.cur != nil {
		res := s.cur.Stop(ctx, s.Stop)
		s.stopped = res
		if !res.OK() {
			s.fenced, s.cur, s.last = s.cur, nil, res
			return nil, s.fencedErrLocked()
		}
		s.cur = nil
	}
	gen := s.gen + 1
	c, err := s.Owner.Start(ctx, cmd, StartOptions{Purpose: s.Purpose, Generation: &gen})
	if err != nil {
		return nil, err
	}
	s.gen, s.cur = gen, c
	return c, nil
}

// unfenceLocked clears the fence once the fenced generation is seen gone: its leader reaped and
// its scope empty. It then releases it, and returns the release's error, if any, with the fence
// down: the next call goes ahead.
func (s *Slot) unfenceLocked(ctx context.Context) error {
	if s.fenced == nil {
		return nil
	}
	select {
	case <-s.fenced.Done():
		err := s.fenced.Release(ctx)
		if errors.Is(err, errOccupied) {
			break // a member of its scope still runs
		}
		// Its exit is proven: the fence is down, even when the release failed, which is said.
		pid := s.fenced.ID.PID
		s.fenced = nil
		if err != nil {
			return fmt.Errorf("custody: slot: generation %d (pid %d) exited, but: %w", s.gen, pid, err)
		}
		return nil
	default:
	}
	return s.fencedErrLocked()
}

func (s *Slot) fencedErrLocked() error {
	return &FencedError{Generation: s.gen, PID: s.fenced.ID.PID, Result: s.last}
}

// LastStop returns what the last [Slot.Replace] reported of its stop of the generation before:
// whether it exited by itself within the grace, or only to the kill after it
// ([StopResult.Forced]), or not at all (the slot is then fenced). It is the zero StopResult when
// that Replace stopped nothing (the slot's first generation, or one that had been released).
func (s *Slot) LastStop() StopResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// Current returns the running generation and its number, or nil and 0.
func (s *Slot) Current() (*Child, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, 0
	}
	return s.cur, s.gen
}

// Fenced returns the [*FencedError] that would stop a Replace now, or nil.
func (s *Slot) Fenced(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unfenceLocked(ctx)
}
