package scope

// Holds reports whether the process pid is inside s now: a member of its cgroup (or of a cgroup
// nested in it), of its process group, or of its job. A transfer asks it of its receiver: an owner
// inside the scope it takes over would cover a scope that holds itself and its supervisor, and
// nothing outside would kill it any more. A process that cannot be read is reported with an
// error, which the caller must treat as "perhaps".
func (s *Scope) Holds(pid int) (bool, error) { return s.holds(pid) }
