package scope

import "testing"

// CgroupPath returns the file system path of a cgroup scope.
func CgroupPath(t *testing.T, s *Scope) string {
	t.Helper()
	if s.sys.cg == nil {
		t.Fatalf("%v is not a cgroup scope", s)
	}
	return s.sys.cg.path
}

// WithoutGroupSignal makes the scope package act, until the test ends, as on a kernel without
// PIDFD_SIGNAL_PROCESS_GROUP (before Linux 6.9): no group is pinned, every one is checked.
func WithoutGroupSignal(t *testing.T) {
	was := groupSignalBroken.Swap(true)
	t.Cleanup(func() { groupSignalBroken.Store(was) })
}
