package scope

import "sync"

type reservation struct {
	mu sync.Mutex
	cg *cgroup // nil once taken
}

func reserve() (*Reservation, error) {
	cg, err := newScopeCgroup()
	if cg == nil {
		return nil, err
	}
	return &Reservation{rel: cg.rel, sys: reservation{cg: cg}}, nil
}

// take returns the reserved cgroup, once; nil for a nil reservation or one already taken.
func (r *Reservation) take() *cgroup {
	if r == nil {
		return nil
	}
	r.sys.mu.Lock()
	defer r.sys.mu.Unlock()
	cg := r.sys.cg
	r.sys.cg = nil
	return cg
}

func (r *Reservation) taken() bool {
	r.sys.mu.Lock()
	defer r.sys.mu.Unlock()
	return r.sys.cg == nil
}

func (r *Reservation) cancel() error {
	if cg := r.take(); cg != nil {
		return cg.teardown()
	}
	return nil
}
