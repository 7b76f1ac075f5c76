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
