package custody

import (
	"context"
	"errors"
	"fmt"

	"github.com/custody-dev/custody/stop"
)

// Grant mints a grant for the slot's running generation (see [Child.Grant]) and returns it with
// the generation's number, which travels in the ledger row. Once the generation is transferred
// the slot no longer owns it, but it stays the slot's barrier: Replace fails with a
// [*FencedError] (outcome no-authority: the generation is another owner's) until it is seen to
// exit, so that two generations never run at once.
func (s *Slot) Grant(opts GrantOptions) (*Grant, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, 0, errors.New("custody: slot grant: no generation runs")
	}
	g, err := s.cur.Grant(opts)
	if err != nil {
		return nil, 0, err
	}
	go s.handed(g, s.cur)
	return g, s.gen, nil
}

// handed makes a transferred generation the slot's fence.
func (s *Slot) handed(g *Grant, c *Child) {
	<-g.Done()
	res := g.Result()
	if res.Outcome != Transferred {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == c {
		s.cur, s.fenced = nil, c
		s.last = stop.Result{PID: c.ID.PID, Outcome: stop.NoAuthority,
			Reason: fmt.Sprintf("handed to pid %d", res.Receiver)}
	}
}

// Adopt redeems a grant for another slot's generation (see [Owner.Adopt] and [Slot.Grant]) and
// makes it this slot's running generation, keeping its number: the next Replace stops it and
// starts the one after. It fails while the slot runs a generation of its own.
func (s *Slot) Adopt(ctx context.Context, grant string) (*Child, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unfenceLocked(ctx); err != nil {
		return nil, err
	}
	if s.cur != nil {
		return nil, fmt.Errorf("custody: slot adopt: generation %d runs", s.gen)
	}
	c, err := s.Owner.Adopt(ctx, grant)
	if err != nil {
		return nil, err
	}
	if g := c.row.Generation; g != nil && *g > s.gen {
		s.gen = *g
	}
	s.cur = c
	return c, nil
}
