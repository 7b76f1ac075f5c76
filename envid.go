package custody

import (
	"os"
	"os/exec"

	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
)

// stampScopeID gives cmd's child a scope id of its own in its environment (see
// [scope.EnvScopeID]), after the ids of the scopes this owner runs in: on the process-group path
// a stop, a reap and the owner's death reach the descendants that left the child's group but
// kept their environment.
func stampScopeID(cmd *exec.Cmd) { cmd.Env = scope.StampEnvID(cmd.Env, scope.NewEnvID()) }

// scopeID returns the child's scope id: the one stampScopeID gave it, or for an adopted child
// the one its row records (its giver's owner stamped it), or "" when the row has none or holds
// something that is not a scope id. An adopted child is swept by its id as an owned one is: a
// descendant that left its process group for a session of its own is the receiver's to stop, at
// a stop, at a release's emptiness check and at the receiver's death.
func (c *Child) scopeID() string {
	if c.cmd == nil {
		if id := c.row.ScopeID; scope.ValidEnvID(id) {
			return id
		}
		return ""
	}
	return scope.EnvIDOf(c.cmd.Env)
}

// swept reports whether the child's stops and emptiness include the processes carrying its scope
// id: on the process-group path, where the group does not hold what left it.
func (c *Child) swept() bool { return c.scopeID() != "" && c.scope.Kind() == scope.KindGroup }

// stopScope returns what a stop of the child acts on, and what to call after it.
func (c *Child) stopScope() (stop.Scope, func()) {
	if !c.swept() {
		return c.scope, func() {}
	}
	w := scope.Sweep(c.scope, c.scopeID(), os.Getuid())
	return w, w.Close
}

// scopeEmpty is [scope.Scope.Empty], and on the process-group path also no process of the
// owner's user carrying the child's scope id: such a process is the scope's, and a child released
// while one runs would leave it uncovered, with no row for a stop or a reap to find.
func (c *Child) scopeEmpty() (bool, error) {
	empty, err := c.scope.Empty()
	if err != nil || !empty || !c.swept() {
		return empty, err
	}
	strays, err := scope.FindStrays([]string{c.scopeID()}, os.Getuid())
	if err != nil {
		return empty, nil // no sweep here (a system without one): the group decides, as before
	}
	defer strays.Close()
	return strays.Len() == 0, nil
}

// Containment names the kind of the child's scope as its ledger row does: "cgroup",
// "process-group" or "job" (see [scope.Kind.Containment]).
func (c *Child) Containment() string { return c.scope.Kind().Containment() }
