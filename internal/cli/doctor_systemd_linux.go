package cli

import (
	"errors"

	"github.com/custody-dev/custody/internal/sdunit"
	"github.com/custody-dev/custody/scope"
)

// systemdCheck says whether custody's cgroups come from a systemd user manager, which unit it
// asks for, and why (see scope.Delegation). Doctor asks the manager whether it answers, and
// starts no unit.
func systemdCheck() check {
	via, why := scope.Delegation()
	switch {
	case via == sdunit.ViaScope && why == nil:
		return check{Name: "systemd", OK: true, Detail: "systemd-scope: this process's cgroups are in a transient scope with Delegate=yes"}
	case via == sdunit.ViaService && why == nil:
		return check{Name: "systemd", OK: true, Detail: "systemd-service: this process runs in a transient service with Delegate=yes, as custody agent for custody run"}
	case via == sdunit.ViaScope:
		return check{Name: "systemd", OK: true, Detail: "systemd-scope: " + why.Error() + "; a start asks the user manager " +
			"for a transient scope with Delegate=yes, moves the owner into it and makes its cgroups there"}
	case via == sdunit.ViaService:
		return check{Name: "systemd", OK: true, Detail: "systemd-service: " + why.Error() + "; custody run starts its " +
			"child through custody agent in a transient service with Delegate=yes, born in a cgroup there"}
	case errors.Is(why, sdunit.ErrNoManager):
		return check{Name: "systemd", Detail: "not used: " + why.Error()}
	}
	// Nothing to ask for: needed only where this process gets no cgroup without it, and then the
	// line must not read as if all were well beside a containment line that says no.
	if kind, _, _ := scope.Containment(); kind != scope.KindCgroup {
		return check{Name: "systemd", Detail: "not used: " + why.Error()}
	}
	return check{Name: "systemd", OK: true, Detail: "not needed: " + why.Error()}
}
