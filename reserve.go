package custody

import "github.com/custody-dev/custody/scope"

// An owner keeps one reservation: the next cgroup child's cgroup, made after a start and covered with
// the supervisor as a reservation (see [scope.Reservation] and supervise.Client.Reserve),
// so that the next start neither makes a cgroup nor has the supervisor open one beside its
// child's exec. An owner keeps one from its second start on, while its starts get cgroups: a
// one-shot owner (custody run) would make a cgroup only to remove it at its exit, beside its
// child's startup. A reservation the next start cannot use (its process now gives children process
// groups) is removed then; Close removes the last, and so does the release of an idle
// supervisor (see idle). An owner that dies with a reservation leaves an empty cgroup, which its
// supervisor removes (covered or not: see scope.RemoveDeadOwner), and reap when the supervisor
// could not (killed with the owner).

// takeReserved returns the reservation, or nil.
func (o *Owner) takeReserved() *scope.Reservation {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.reserved
	o.reserved = nil
	return r
}

// refill makes the next reservation in the background, unless the owner has one, is making one, or is
// closed. Close waits for it.
func (o *Owner) reserveNext() {
	o.mu.Lock()
	o.cgroupStarts++
	if o.closed || o.reserved != nil || o.reserving || o.cgroupStarts < 2 {
		o.mu.Unlock()
		return
	}
	o.reserving = true
	o.ops.Add(1)
	o.mu.Unlock()
	go func() {
		defer o.ops.Done()
		r := o.reserve()
		o.mu.Lock()
		o.reserving = false
		keep := r != nil && !o.closed && o.reserved == nil
		if keep {
			o.reserved = r
		}
		o.mu.Unlock()
		// A reservation made while the supervisor was being released as idle would be held with none
		// to cover it: idle may have run before it was kept. One released later runs idle after.
		if keep && o.Supervisor.PID() == 0 && o.takeReserved() == r {
			keep = false
		}
		if !keep {
			o.dropReserved(r)
		}
	}()
}

// idle lets go of the reservation and of this process's empty cgroup directory when the supervisor,
// covering nothing else, is released as idle or dies (supervise.Client.OnIdle): with no supervisor
// running, the owner's death would leave both behind until a reap. The next start makes its
// cgroup, and its directory, itself.
func (o *Owner) idle() {
	o.dropReserved(o.takeReserved())
	scope.ReleaseOwnerDir()
}

// reserve makes and covers a reservation; nil when none can be had now: the next start then makes its
// cgroup itself, and reports why it cannot.
func (o *Owner) reserve() *scope.Reservation {
	r, err := scope.Reserve()
	if err != nil || r == nil {
		return nil
	}
	if err := o.Supervisor.Reserve(r.Desc()); err != nil {
		o.dropReserved(r)
		return nil
	}
	return r
}

// dropReserved uncovers and removes a reservation no child was prepared in.
func (o *Owner) dropReserved(r *scope.Reservation) {
	if r == nil || r.Taken() {
		return
	}
	o.Supervisor.Uncover(r.Desc())
	r.Cancel()
}
