package scope

import (
	"fmt"
	"os"
	"strings"
)

// cgroupHolds reports whether pid's cgroup (its /proc/PID/cgroup "0::" line) is rel or below it.
func cgroupHolds(rel string, pid int) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false, err
	}
	own, ok := unifiedPath(b)
	if !ok {
		return false, fmt.Errorf("/proc/%d/cgroup: no cgroup v2 line", pid)
	}
	return own == rel || strings.HasPrefix(own, strings.TrimSuffix(rel, "/")+"/"), nil
}
