package scope

import "errors"

// CgroupVia names how this process's cgroup scopes were had, where not in a subtree custody could
// write by itself: "systemd-scope" (a transient scope with Delegate=yes holding this process,
// asked of the user manager), "systemd-service" (a transient service with Delegate=yes running
// custody agent, asked for by custody run), or "" (its own cgroup, the hierarchy's, or no cgroup
// at all). Ledger rows record it as "cgroup_via". Linux only; "" elsewhere.
func CgroupVia() string { return cgroupVia() }

// Delegation reports whether this process's cgroups come, or would come, from systemd, and why:
// via is as [CgroupVia], or the unit a start would ask for ("systemd-scope"; "systemd-service"
// with why wrapping [ErrNeedsService]), or "" when systemd is not asked, why then saying why not
// (its own cgroup is usable as it is, or no user manager answers on the session bus). It asks
// the user manager whether it answers, and starts no unit. custody doctor shows it.
func Delegation() (via string, why error) { return delegation() }

// NeedsService returns nil when this process's children can have cgroups without a systemd
// service (its own cgroup will do, or a scope can be asked for, or none can be had at all), and
// otherwise why not, wrapping [ErrNeedsService]: its own cgroup is root's and unusable as it is,
// and a user manager answers. It asks the manager only in that case, so that custody run's common
// path pays no D-Bus round trip for it.
func NeedsService() error { return needsService() }

// ErrNeedsService is wrapped by [Containment]'s why, and by [Delegation]'s, where only a transient
// service can give this process's children delegated cgroups: its own cgroup is not the user's
// (an SSH session's root-owned session-N.scope), so the user manager cannot move it into a scope
// of its own, but a service the manager forks is born in a delegated cgroup. custody run then
// starts its child through custody agent in such a service.
var ErrNeedsService = errors.New("only a transient systemd service can hold delegated cgroups for this process")
