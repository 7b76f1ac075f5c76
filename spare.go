package custody

import "github.com/custody-dev/custody/scope"

// An owner keeps one spare: the next cgroup child's cgroup, made after a start and covered with
// the supervisor as a reservation (see [scope.Reservation] and supervise.Client.Reserve),
// so that the next start neither makes a cgroup nor has the supervisor open one beside its
// child's exec. An owner keeps one from its second start on, while its starts get cgroups: a
// one-shot owner (custody run) would make a cgroup only to remove it at its exit, beside its
// child's startup. A spare the next start cannot use (its process now gives children process
// groups) is removed then; Close removes the last, and so does the release of an idle
// supervisor (see idle). An owner that dies with a spare leaves an empty cgroup, which its
// supervisor removes (covered or not: see scope.RemoveDeadOwner), and reap when the supervisor
// could not (killed with the owner).

// takeSpare returns the spare, or nil.
func (o *Owner) takeSpare() *scope.Reservation {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.spare
	o.spare = nil
	return r
}

// refill makes the next spare in the background, unless the owner has one, is making one, or is
// closed. Close waits for it.
func (o *Owner) refill() {
	o.mu.Lock()
	o.cgroupStarts++
	if o.closed || o.spare != nil || o.refilling || o.cgroupStarts < 2 {
		o.mu.Unlock()
		return
	}
	o.refilling = true
	o.ops.Add(1)
	o.mu.Unlock()
	go func() {
		defer o.ops.Done()
		r := o.reserve()
		o.mu.Lock()
		o.refilling = false
		keep := r != nil && !o.closed && o.spare == nil
		if keep {
			o.spare = r
		}
		o.mu.Unlock()
		// A spare made while the supervisor was being released as idle would be held with none
		// to cover it: idle may have run before it was kept. One released later runs idle after.
		if keep && o.Supervisor.PID() == 0 && o.takeSpare() == r {
			keep = false
		}
		if !keep {
			o.dropSpare(r)
		}
	}()
}

// idle lets go of the spare and of this process's empty cgroup directory when the supervisor,
// covering nothing else, is released as idle or dies (supervise.Client.OnIdle): with no supervisor
// running, the owner's death would leave both behind until a reap. The next start makes its
// cgroup, and its directory, itself.
func (o *Owner) idle() {
	o.dropSpare(o.takeSpare())
	scope.ReleaseOwnerDir()
}

// reserve makes and covers a spare; nil when none can be had now: the next start then makes its
// cgroup itself, and reports why it cannot.
func (o *Owner) reserve() *scope.Reservation {
	r, err := scope.Reserve()
	if err != nil || r == nil {
		return nil
	}
	if err := o.Supervisor.Reserve(r.Desc()); err != nil {
		o.dropSpare(r)
		return nil
	}
	return r
}

// dropSpare uncovers and removes a spare no child was prepared in.
func (o *Owner) dropSpare(r *scope.Reservation) {
	if r == nil || r.Taken() {
		return
	}
	o.Supervisor.Uncover(r.Desc())
	r.Cancel()
}
