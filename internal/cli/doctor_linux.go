package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
)

// features probes each kernel facility custody can use, for real.
func features() []check {
	return []check{pidfdCheck(), pidfsCheck(), cgroupCheck(), subreaperCheck(), bootCheck()}
}

func pidfsCheck() check {
	if err := procid.PidfsError(); err != nil {
		return check{Name: "pidfs ids", Detail: err.Error() + "; rows are matched by start ticks, " +
			"which cannot tell a PID recycled within one clock tick"}
	}
	return check{Name: "pidfs ids", OK: true, Detail: "fstat of a pidfd names one process per boot; rows record it"}
}

func pidfdCheck() check {
	if err := authority.PidfdError(); err != nil {
		return check{Name: "pidfd", Detail: err.Error() + "; falls back to start-time checks before each signal"}
	}
	return check{Name: "pidfd", OK: true, Detail: "pidfd_open, pidfd_send_signal and poll work"}
}

// cgroupCheck looks for this process's cgroup v2 directory and whether a child cgroup can be made
// in it (made and removed at once).
func cgroupCheck() check {
	dir, err := ownCgroup2Dir()
	if err != nil {
		return check{Name: "cgroup v2 writable", Detail: err.Error()}
	}
	probe := filepath.Join(dir, fmt.Sprintf("custody-doctor-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return check{Name: "cgroup v2 writable", Detail: fmt.Sprintf("%s: %v", dir, err)}
	}
	os.Remove(probe)
	return check{Name: "cgroup v2 writable", OK: true, Detail: dir}
}

// ownCgroup2Dir joins the cgroup2 mount point from /proc/self/mountinfo with this process's
// unified-hierarchy path ("0::/path") from /proc/self/cgroup.
func ownCgroup2Dir() (string, error) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var rel string
	for line := range bytes.Lines(cg) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			rel = string(bytes.TrimSpace(p))
		}
	}
	if rel == "" {
		return "", fmt.Errorf("no cgroup v2 membership in /proc/self/cgroup")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 25 0:31 / /sys/fs/cgroup rw,… - cgroup2 cgroup2 rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) >= 5 {
			return filepath.Join(f[4], strings.TrimPrefix(rel, f[3])), nil
		}
	}
	return "", fmt.Errorf("no cgroup2 mount")
}

// subreaperCheck sets and clears PR_SET_CHILD_SUBREAPER on this short-lived process.
func subreaperCheck() check {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return check{Name: "child subreaper", Detail: os.NewSyscallError("prctl", err).Error()}
	}
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	return check{Name: "child subreaper", OK: true, Detail: "PR_SET_CHILD_SUBREAPER works"}
}
