package reap

import (
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// strays decides a row whose process is dead: on the process-group path its scope's id may still
// be carried by descendants that left the group (see scope.FindStrays), which only this reap can
// find once the owner and its supervisor are gone. Such a row is reaped (the stop finds them, or
// says already-exited and signals nothing) when it would be were its process alive: reapable, and
// its spawner provably dead. ok is false when the row is simply gone.
func (j *judge) strays(r ledger.Row) (Action, string, bool) {
	full := r.Decoded()
	if !sweepable(full) || !reapable(full) {
		return "", "", false
	}
	spawner := full.SpawnerRecord()
	if spawner.PID <= 0 {
		return "", "", false
	}
	if s, _ := j.check(spawner); s != procid.Dead {
		return "", "", false
	}
	return Reap, SpawnerDead, true
}

// sweepable reports whether a stop of the row reaches processes by its scope id: a process-group
// row with one. Such a row is reaped even once its process is gone (each process the sweep finds
// is proven to run as the ledger's owner, as the row's process would be).
func sweepable(r ledger.Row) bool {
	full := r.Decoded()
	return full.ScopeID != "" && scope.Kind(full.Scope) == scope.KindGroup
}
