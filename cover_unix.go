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

// coverEarly covers what of a child's scope exists before the child (see scope.Prepared.Desc: a
// cgroup), and reports whether it covered anything: a child born into a covered scope needs no
// gate, and the scopes it makes, if it is an owner, nest below its own.
func (o *Owner) coverEarly(d scope.Desc) (bool, error) {
	if d == (scope.Desc{}) {
		return false, nil
	}
	return true, o.Supervisor.Cover(d)
}

// cover covers a started child's scope with the supervisor: a process group, bound to its leader
// and with its scope id (see stampScopeID), once it exists; a cgroup was covered before the
// child, and covering it again writes nothing.
func (o *Owner) cover(s *scope.Scope, scopeID string) error {
	d := s.Desc()
	d.ScopeID = scopeID
	return o.Supervisor.Cover(d)
}

// uncover ends the cover of a child's scope by the supervisor and every outer owner's.
func (o *Owner) uncover(s *scope.Scope) error {
	d := s.Desc()
	err := o.Supervisor.Uncover(d)
	for _, out := range o.outer {
		err = errors.Join(err, out.Uncover(d))
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
// (its scopes nest below its own cgroup, covered before it was born: bornCovered), nor an
// inherited one. A socket path holding the list separator (':') cannot be named, and is left out.
func (o *Owner) stampOuter(cmd *exec.Cmd, bornCovered bool) {
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, supervise.EnvOuter+"=") })
	if bornCovered {
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

// coverOuter covers a process-group child's group with every outer owner's supervisor too,
// nearest first, when this owner is nested: each outer owner's death then stops it even when
// this owner, the owners between and their supervisors are gone. A refusal fails the start: the
// child would be uncovered by that outer scope. A cgroup needs no outer cover (it nests).
func (o *Owner) coverOuter(s *scope.Scope) error {
	d := s.Desc()
	for _, out := range o.outer {
		if err := out.Cover(d); err != nil {
			return err
		}
	}
	return nil
}
