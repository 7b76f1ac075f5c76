//go:build unix

package custody

import (
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

// warm starts the supervisor before the child, so that covering the child right after its start
// is one write to a pipe: the window in which the owner's death would orphan it stays as short
// as a system call.
func (o *Owner) warm() error { return o.Supervisor.Start() }

// cover registers the child's process group with the supervisor, bound to its leader.
func (o *Owner) cover(s *scope.Scope) error {
	l := s.Leader()
	return o.Supervisor.Register(supervise.Group{PID: l.PID, PGID: s.PGID(), Start: l.Start, PidfdID: l.PidfdID})
}

func (o *Owner) uncover(s *scope.Scope) error { return o.Supervisor.Unregister(s.PGID()) }
