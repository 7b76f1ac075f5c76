// Package sdunit asks a systemd user manager, over its D-Bus session bus, for transient units
// with Delegate=yes: the cgroup subtree systemd hands to a process that manages cgroups itself.
// Custody asks for one where it cannot write a cgroup of its own (see package scope), and only
// through this package, so that the D-Bus client is linked in one place.
//
// What systemd promises (systemd.resource-control(5), "Delegate="; docs/CGROUP_DELEGATION.md):
// a unit with Delegate=yes owns its cgroup's subtree; systemd makes no cgroup below it, and
// marks it with the extended attribute trusted.delegate (system manager) or user.delegate (user
// manager, systemd 251+). Below any other unit's cgroup, only systemd may write. A transient
// scope takes existing processes (its PIDs property, moved in by the manager when it is
// started); a transient service forks its own ExecStart. A scope ends when its last process
// has left it; a service when its main process exits, and CollectMode=inactive-or-failed
// unloads it then, whether it succeeded or failed, so that nothing is left in the manager.
package sdunit

import (
	"errors"
	"fmt"
)

// Kinds of unit a process asks for, and the words a ledger row's "cgroup_via" field records.
const (
	ViaScope   = "systemd-scope"   // a transient scope holding the owner itself
	ViaService = "systemd-service" // a transient service running an agent for the owner
)

// ErrNoManager is wrapped by [Dial] when no session bus answers: no systemd user manager here.
var ErrNoManager = errors.New("no systemd user manager on the session bus")

// unitType is the D-Bus interface suffix of a unit's type-specific properties, by name suffix.
func unitType(unit string) (string, error) {
	for _, s := range [...]struct{ suffix, typ string }{{".scope", "Scope"}, {".service", "Service"}} {
		if len(unit) > len(s.suffix) && unit[len(unit)-len(s.suffix):] == s.suffix {
			return s.typ, nil
		}
	}
	return "", fmt.Errorf("sdunit: unit %q is neither a scope nor a service", unit)
}
