//go:build unix && !linux

package scope

// cgroupHolds: a cgroup scope exists on Linux only.
func cgroupHolds(string, int) (bool, error) { return false, noCgroups() }
