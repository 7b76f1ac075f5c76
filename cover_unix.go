//go:build unix

package custody

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"

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
	err := o.Supervisor.Unregister(s.PGID())
	if o.outer != nil {
		err = errors.Join(err, o.outer.Unregister(s.PGID()))
	}
	return err
}

// outerFromEnv returns the outer owner's supervisor this process was started under (see
// [supervise.EnvOuter]), or nil when it runs in no outer owner's process-group scope.
func outerFromEnv() *supervise.Outer {
	if p := os.Getenv(supervise.EnvOuter); p != "" {
		return &supervise.Outer{Path: p}
	}
	return nil
}

// stampOuter names this owner's supervisor to a process-group child, which registers the groups
// it owns there too if it is an owner itself: process groups do not nest, and without it an
// inner scope's residue would outlive this owner. A cgroup child gets no name (its scopes nest
// below its own cgroup), nor an inherited one: only the nearest owner is named.
func (o *Owner) stampOuter(cmd *exec.Cmd, cgroup string) {
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, supervise.EnvOuter+"=") })
	if cgroup != "" {
		return
	}
	if p := o.Supervisor.NestSocket(); p != "" {
		cmd.Env = append(cmd.Env, supervise.EnvOuter+"="+p)
	}
}

// coverOuter registers a process-group child's group with the outer owner's supervisor too, when
// this owner is nested: the outer owner's death then stops it even when this owner and its own
// supervisor are gone. A refusal fails the start: the child would be uncovered by the outer scope.
func (o *Owner) coverOuter(s *scope.Scope) error {
	if o.outer == nil || s.Kind() == scope.KindCgroup {
		return nil
	}
	l := s.Leader()
	return o.outer.Register(supervise.Group{PID: l.PID, PGID: s.PGID(), Start: l.Start, PidfdID: l.PidfdID})
}

func (o *Owner) uncoverPrepared(path string) {
	if path != "" {
		o.Supervisor.UnregisterCgroup(path)
	}
}
