package stop

import (
	"github.com/custody-dev/custody/scope"
)

// sweepStrays widens a stop on the process-group path to the processes carrying the row's scope
// id in their environment (see [Options.ScopeID]): t's scope becomes the group (s, nil when it is
// gone) with them. ok is the target's: a stop decided already goes on only when it was decided
// because the process and its group had exited (already-exited) and strays carrying the id live;
// any other decision (no authority, permission denied) stands, and nothing is signalled. done
// lets go of the strays' handles.
func sweepStrays(t Target, s *scope.Scope, res Result, ok bool, d scope.Desc, opts Options) (_ Target, _ bool, done func()) {
	done = func() {}
	if opts.ScopeID == "" || d.Kind != scope.KindGroup || (!ok && res.Outcome != AlreadyExited) {
		return t, ok, done
	}
	w := scope.Sweep(s, opts.ScopeID, opts.owner())
	if !ok {
		// Looked for now: with none, the stop stays already-exited, and nothing is signalled.
		strays, err := scope.FindStrays([]string{opts.ScopeID}, opts.owner())
		if err != nil {
			return t, false, done
		}
		n := strays.Len()
		strays.Close()
		if n == 0 {
			return t, false, done
		}
	}
	t.Scope = w
	return t, true, w.Close
}
