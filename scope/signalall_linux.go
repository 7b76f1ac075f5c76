package scope

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// signalAll signals each scope as Signal does, asking once per directory of cgroup scopes (one
// owner's, as a sweep has) whether any cgroup lies below them, rather than once per scope: a
// sweep of a thousand scopes spent a tenth of its time on that question.
func signalAll(ss []*Scope, sig os.Signal) []error {
	errs := make([]error, len(ss))
	us, err := unixSignal(sig)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	unnested := make(map[string]bool)
	for i, s := range ss {
		cg := s.sys.cgroup()
		if cg == nil || us == unix.SIGKILL {
			errs[i] = s.signal(sig)
			continue
		}
		dir := filepath.Dir(cg.path)
		flat, ok := unnested[dir]
		if !ok {
			flat = onlyChildren(dir)
			unnested[dir] = flat
		}
		if flat {
			errs[i] = cg.signalNested(us, func() bool { return false })
		} else {
			errs[i] = cg.signal(us)
		}
	}
	return errs
}

// onlyChildren reports whether every cgroup below the cgroup directory dir is a child of it: its
// cgroup.stat counts as many descendants as it has subdirectories (kernfs counts a directory's
// links as 2 plus its subdirectories). Then no scope in dir has cgroups below it, and each one's
// members are one read of its cgroup.procs. A cgroup made below a scope after this look holds
// processes born or moved there since, which a sweep leaves to cgroup.kill, as it does for
// those a member forks after its members were read.
func onlyChildren(dir string) bool {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var fs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(fd, &fs) != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC || unix.Fstat(fd, &st) != nil {
		return false
	}
	sfd, err := unix.Openat(fd, "cgroup.stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(sfd)
	stat, err := readFrom(sfd, "cgroup.stat", false)
	if err != nil {
		return false
	}
	n, ok := statField(stat, "nr_descendants")
	// Stat_t.Nlink is a uint64 on amd64 but a uint32 on arm64, arm, 386, riscv64, loong64 and mips.
	return ok && n == uint64(st.Nlink)-2
}

// statField returns a field of cgroup.stat.
func statField(stat []byte, name string) (uint64, bool) {
	for line := range bytes.Lines(stat) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte(name+" ")); ok {
			n, err := strconv.ParseUint(string(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
