//go:build unix

package custody

import (
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

// warm starts the supervisor before the child, so that covering a process-group child right after
// its start costs one write to a pipe. The window in which the owner's death would orphan such a
// child is longer than that write: it runs from the fork through the exec and the read of the
// child's identity to the write. A cgroup child has no window: its cgroup is covered before it
// exists.
func (o *Owner) warm() error { return o.Supervisor.Start() }

// coverPrepared covers the cgroup scope.Prepare made for cmd's child, before the child exists.
// It reports the path covered, "" when the child gets no cgroup.
func (o *Owner) coverPrepared(path string) error {
	if path == "" {
		return nil
	}
	return o.Supervisor.RegisterCgroup(path)
}

// cover registers a process-group child's group with the supervisor, bound to its leader. A
// cgroup child was covered by coverPrepared.
func (o *Owner) cover(s *scope.Scope) error {
	if s.Kind() == scope.KindCgroup {
		return nil
	}
	l := s.Leader()
	return o.Supervisor.Register(supervise.Group{PID: l.PID, PGID: s.PGID(), Start: l.Start, PidfdID: l.PidfdID})
}

func (o *Owner) uncover(s *scope.Scope) error {
	if d := s.Desc(); d.Kind == scope.KindCgroup {
		return o.Supervisor.UnregisterCgroup(d.Cgroup)
	}
	return o.Supervisor.Unregister(s.PGID())
}

func (o *Owner) uncoverPrepared(path string) {
	if path != "" {
		o.Supervisor.UnregisterCgroup(path)
	}
}
