package scope

// A Reservation is the cgroup of a future scope, made ahead of the child that will be born in it
// (Linux; elsewhere there is none to make). An owner makes its next child's cgroup, and covers it
// with its supervisor, after a start rather than during the next one: making a cgroup, and the
// supervisor's opening of it, would otherwise run on the start's path, beside the child's exec on
// a machine with few CPUs. An empty cgroup costs the kernel one directory and holds nothing: an
// owner that dies with a reservation leaves an empty cgroup, which its supervisor removes (see
// [RemoveDeadOwner]), and reap when the supervisor could not (see [Leftovers]).
type Reservation struct {
	rel string // the cgroup's path below the mount, kept after it is taken
	sys reservation
}

// Reserve makes the cgroup of a future scope. It returns nil, and no error, where this process's
// children get no cgroup (see [Containment]): a process group cannot be made ahead.
func Reserve() (*Reservation, error) { return reserve() }

// Cgroup returns the reserved cgroup's path below the cgroup2 mount, as [Desc.Cgroup] names it.
func (r *Reservation) Cgroup() string { return r.rel }

// Desc describes the reserved cgroup, as the [Prepared.Desc] of a child prepared in it will: what
// a supervisor covers ahead of that child.
func (r *Reservation) Desc() Desc { return Desc{Kind: KindCgroup, Cgroup: r.rel} }

// Taken reports whether [PrepareReserved] has used the reservation for a child, or [Reservation.Cancel]
// removed it: it is then not the reservation's to remove.
func (r *Reservation) Taken() bool { return r.taken() }

// Cancel removes the reserved cgroup when no child was prepared in it; it does nothing once
// taken.
func (r *Reservation) Cancel() error { return r.cancel() }
