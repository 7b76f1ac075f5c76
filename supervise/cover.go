package supervise

import "github.com/custody-dev/custody/scope"

// Cover covers the scope d describes against the owner's death, whatever its kind: a process
// group (KindGroup) bound to its leader (d.Leader, d.PGID), stopped by the supervisor when the
// owner dies (see [Serve]); a cgroup (KindCgroup, d.Cgroup) custody made, stopped with
// cgroup.kill and removed. It returns once the line is in the supervisor's pipe, starting the
// supervisor first if none runs: from then on the owner's death, at any instant, reaches the
// scope. A cgroup is covered right after it is made, before its child is born in it (see
// [scope.Prepared.Desc]), so the child is covered from its first instruction; covering it again
// writes nothing. Covering a covered group again replaces its record. The zero Desc (what a
// process group's preparation describes before its child exists) and a job (Windows, where the
// job handle is the cover) cover nothing.
//
// Spawn a process-group child in its own group (SysProcAttr.Setpgid) and cover it right away;
// stop a scope before [Client.Uncover], not after, or an owner death in between orphans it.
func (c *Client) Cover(d scope.Desc) error {
	switch d.Kind {
	case scope.KindGroup:
		return c.register(groupOf(d))
	case scope.KindCgroup:
		return c.registerCgroup(d.Cgroup)
	}
	return nil
}

// Reserve covers a cgroup made ahead of the child that will be born in it (see scope.Reserve,
// [scope.Reservation.Desc]), so that [Client.Cover] at the child's start finds it covered and
// writes nothing: the supervisor opens a cgroup on reading its line, work that would otherwise
// run beside the child's exec. A reservation keeps no supervisor: with none running it covers
// nothing (and returns nil), and a client that covers only reservations is idle, released after
// IdleGrace once it has uncovered them, so that the supervisor leaves them in place. A supervisor
// that dies takes its reservations with it: they are not replayed to the next, and Cover then
// covers the cgroup as if never reserved. The owner's death removes the reserved cgroups, as it
// does every covered cgroup once empty. Other scopes cannot be made ahead: nothing is done.
func (c *Client) Reserve(d scope.Desc) error {
	if d.Kind != scope.KindCgroup {
		return nil
	}
	return c.reserveCgroup(d.Cgroup)
}

// Uncover stops covering the scope d describes; its processes are left alone, and the owner's
// death no longer reaches them. Uncovering a scope that is not covered does nothing. When nothing
// is left covered, the supervisor is released after IdleGrace.
func (c *Client) Uncover(d scope.Desc) error {
	switch d.Kind {
	case scope.KindGroup:
		return c.unregister(d.PGID)
	case scope.KindCgroup:
		return c.unregisterCgroup(d.Cgroup)
	}
	return nil
}

// groupOf is the registration of the process group d describes.
func groupOf(d scope.Desc) Group {
	return Group{PID: d.Leader.PID, PGID: d.PGID, Start: d.Leader.Start, PidfdID: d.Leader.PidfdID, ScopeID: d.ScopeID}
}
