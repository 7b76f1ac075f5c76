package scope

import (
	"fmt"
	"os/exec"

	"github.com/custody-dev/custody/authority"
)

// prepareCgroup has clone3 start cmd's child inside a cgroup of its own, r's when given and not
// taken, or else one made now, when this process can have cgroup scopes (see Containment), and
// returns it; nil, and no error, when the child's scope is its process group. A command prepared
// already (UseCgroupFD set) is refused.
func prepareCgroup(cmd *exec.Cmd, r *Reservation) (*cgroup, error) {
	a := cmd.SysProcAttr
	if a.UseCgroupFD {
		return nil, fmt.Errorf("scope: prepare %s: SysProcAttr.UseCgroupFD is already set", cmd.Path)
	}
	if forcedGroups() != nil {
		return nil, nil
	}
	cg := r.take()
	if cg == nil {
		var err error
		if cg, err = newScopeCgroup(); err != nil {
			return nil, fmt.Errorf("scope: prepare %s: %w", cmd.Path, err)
		}
		if cg == nil {
			return nil, nil // no cgroup for this process: a process group, as Containment reports
		}
	}
	a.UseCgroupFD, a.CgroupFD = true, cg.fd
	return cg, nil
}

// newScopeCgroup makes the cgroup of a new scope. It returns nil, and no error, where this
// process's children get process groups: asked for (see EnvContainment), or no cgroup can be
// made for this process (see Containment); an error only where cgroups are usable.
func newScopeCgroup() (*cgroup, error) {
	if forcedGroups() != nil {
		return nil, nil
	}
	cg, err := self.newScope()
	if err != nil && !self.usable() {
		return nil, nil
	}
	return cg, err
}

// openRecorded opens a recorded scope's cgroup and proves it is the recorded one.
func openRecorded(rel string, id uint64) (*cgroup, error) {
	h, err := findHierarchy()
	if err != nil {
		return nil, fmt.Errorf("scope: open cgroup %s: %w", rel, err)
	}
	switch {
	case !isScopePath(rel):
		return nil, fmt.Errorf("%w over cgroup %s: not a scope custody made", authority.ErrNoAuthority, rel)
	case id == 0:
		return nil, fmt.Errorf("%w over cgroup %s: no cgroup id recorded", authority.ErrNoAuthority, rel)
	}
	cg, err := openCgroup(h, rel)
	if err != nil {
		return nil, err
	}
	if cg.id != id {
		cg.close()
		return nil, cgroupNotRecorded(rel, id, cg.id)
	}
	return cg, nil
}

func openCgroupPath(rel string) (*Scope, error) {
	h, err := findHierarchy()
	if err != nil {
		return nil, fmt.Errorf("scope: open cgroup %s: %w", rel, err)
	}
	if !isScopePath(rel) {
		return nil, fmt.Errorf("%w over cgroup %s: not a scope custody made", authority.ErrNoAuthority, rel)
	}
	cg, err := openCgroup(h, rel)
	if err != nil {
		return nil, err
	}
	cg.hold()
	return &Scope{sys: sysScope{m: cgroupScope{cg}}}, nil
}

// usable reports whether this process has cgroup scopes (its owner directory could be made).
func (o *owner) usable() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.made
}
