package procid

import "slices"

// Presence answers [Exists] for many PIDs at once: a ledger write checks every row. It holds a
// snapshot of the PIDs that existed when it was taken. A listed PID may have exited since, so
// being listed proves nothing (as Exists never does); an unlisted PID is checked again with
// signal 0, so a process hidden from the listing (hidepid) or born after it is never taken for
// dead.
type Presence struct {
	listed []int32 // sorted
}

// NewPresence takes the snapshot; where none can be taken it answers every query with Exists.
func NewPresence() *Presence {
	l, err := listPIDs()
	if err != nil {
		return &Presence{}
	}
	slices.Sort(l)
	return &Presence{listed: l}
}

// Exists reports whether a process may hold pid: false proves there is none.
func (p *Presence) Exists(pid int) bool {
	if pid <= 0 || pid > 1<<31-1 {
		return false
	}
	if _, ok := slices.BinarySearch(p.listed, int32(pid)); ok {
		return true
	}
	return Exists(pid)
}
