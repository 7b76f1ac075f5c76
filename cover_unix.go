//go:build unix

package custody

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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

// cover registers a process-group child's group with the supervisor, bound to its leader, with
// its scope id (see stampScopeID) when it has one. A
// cgroup child was covered by coverPrepared.
func (o *Owner) cover(s *scope.Scope, scopeID string) error {
	if s.Kind() == scope.KindCgroup {
		return nil
	}
	l := s.Leader()
	return o.Supervisor.Register(supervise.Group{PID: l.PID, PGID: s.PGID(), Start: l.Start, PidfdID: l.PidfdID, ScopeID: scopeID})
}

func (o *Owner) uncover(s *scope.Scope) error {
	if d := s.Desc(); d.Kind == scope.KindCgroup {
		return o.Supervisor.UnregisterCgroup(d.Cgroup)
	}
	err := o.Supervisor.Unregister(s.PGID())
	for _, out := range o.outer {
		err = errors.Join(err, out.Unregister(s.PGID()))
	}
	return err
}

// outersFromEnv returns the supervisors of the owners this process was started under on the
// process-group path, nearest first (see [supervise.EnvOuter]), or nil when it runs in no outer
// owner's process-group scope.
func outersFromEnv() []*supervise.Outer {
	var outers []*supervise.Outer
	for _, p := range filepath.SplitList(os.Getenv(supervise.EnvOuter)) {
		if p != "" {
			outers = append(outers, &supervise.Outer{Path: p})
		}
	}
	return outers
}

// stampOuter names this owner's supervisor, then every outer owner's this owner registers with,
// to a process-group child, which registers the groups it owns with each of them if it is an
// owner itself: process groups do not nest, and without it an inner scope's residue would
// outlive this owner, and, were only the nearest owner named, every outer owner whose death
// should reach it once this owner and its supervisor died together. A cgroup child gets no name
// (its scopes nest below its own cgroup), nor an inherited one. A socket path holding the list
// separator (':') cannot be named, and is left out.
func (o *Owner) stampOuter(cmd *exec.Cmd, cgroup string) {
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, supervise.EnvOuter+"=") })
	if cgroup != "" {
		return
	}
	paths := make([]string, 0, 1+len(o.outer))
	if p := o.Supervisor.NestSocket(); p != "" {
		paths = append(paths, p)
	}
	for _, out := range o.outer {
		paths = append(paths, out.Path)
	}
	paths = slices.DeleteFunc(paths, func(p string) bool { return strings.ContainsRune(p, filepath.ListSeparator) })
	if len(paths) > 0 {
		cmd.Env = append(cmd.Env, supervise.EnvOuter+"="+strings.Join(paths, string(filepath.ListSeparator)))
	}
}

// coverOuter registers a process-group child's group with every outer owner's supervisor too,
// nearest first, when this owner is nested: each outer owner's death then stops it even when
// this owner, the owners between and their supervisors are gone. A refusal fails the start: the
// child would be uncovered by that outer scope.
func (o *Owner) coverOuter(s *scope.Scope) error {
	if s.Kind() == scope.KindCgroup {
		return nil
	}
	l := s.Leader()
	for _, out := range o.outer {
		if err := out.Register(supervise.Group{PID: l.PID, PGID: s.PGID(), Start: l.Start, PidfdID: l.PidfdID}); err != nil {
			return err
		}
	}
	return nil
}

// coverReserved covers a spare cgroup ahead of its child (see spare.go).
func (o *Owner) coverReserved(path string) error { return o.Supervisor.ReserveCgroup(path) }

func (o *Owner) uncoverPrepared(path string) {
	if path != "" {
		o.Supervisor.UnregisterCgroup(path)
	}
}
