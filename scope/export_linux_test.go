package scope

import (
	"path/filepath"
	"testing"
)

// CgroupPath returns the file system path of a cgroup scope.
func CgroupPath(t *testing.T, s *Scope) string {
	t.Helper()
	if s.sys.cgroup() == nil {
		t.Fatalf("%v is not a cgroup scope", s)
	}
	return s.sys.cgroup().path
}

// WithoutGroupSignal makes the scope package act, until the test ends, as on a kernel without
// PIDFD_SIGNAL_PROCESS_GROUP (before Linux 6.9): no group is pinned, every one is checked.
func WithoutGroupSignal(t *testing.T) {
	was := groupSignalBroken.Swap(true)
	t.Cleanup(func() { groupSignalBroken.Store(was) })
}

// WatchedThroughDir reports whether WaitAll would wait on the cgroup scopes ss, which share a
// directory, through that directory's cgroup.events (they are all its subdirectories).
func WatchedThroughDir(t *testing.T, ss []*Scope) bool {
	t.Helper()
	f := &family{dir: filepath.Dir(CgroupPath(t, ss[0])), events: -1, scopes: ss}
	defer f.closeEvents()
	return f.openEvents()
}
