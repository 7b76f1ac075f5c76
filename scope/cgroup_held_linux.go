package scope

// A supervisor holds open, from the moment it covers a cgroup, the two interface files its sweep
// reads at the owner's death: cgroup.procs (the members, read twice to prove them) and
// cgroup.events (emptiness). On kernfs an openat and its close cost more than the read between
// them, and a sweep of a thousand cgroups made them most of its work, while the processes it had
// signalled were competing for the same CPUs to exit. A held file is read again from offset 0
// with pread(2): a seq_file restarts its iteration there (cgroup.procs included), and a read of
// cgroup.events re-arms its POLLPRI notification. (Whether cgroups are nested below is the
// directory's link count: see nested.)

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// heldFiles are a cgroup's interface files held open by a supervisor (see hold).
type heldFiles struct {
	procs, events int
}

// heldFilesEach is how many descriptors one cgroup's held files use.
const heldFilesEach = 2

// heldCount counts the descriptors all held files use; it is capped at a quarter of
// RLIMIT_NOFILE (fdQuarter), so that a supervisor covering many cgroups never spends on held
// files the descriptors its sweep needs for pidfds (the held files are an economy: without them
// every read opens its file).
var (
	heldCount atomic.Int64
	fdQuarter = sync.OnceValue(func() int64 {
		var r unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil {
			return 0
		}
		return int64(min(r.Cur, 1<<20) / 4)
	})
)

// hold opens the cgroup's held files, or holds none when the budget or an open says no: every
// read then opens its file, as for a cgroup that is not held.
func (c *cgroup) hold() {
	if heldCount.Add(heldFilesEach) > fdQuarter() {
		heldCount.Add(-heldFilesEach)
		return
	}
	c.with(func(dir int) error {
		h := &heldFiles{procs: -1, events: -1}
		for _, f := range []struct {
			name string
			fd   *int
		}{{"cgroup.procs", &h.procs}, {"cgroup.events", &h.events}} {
			fd, err := unix.Openat(dir, f.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				h.close()
				heldCount.Add(-heldFilesEach)
				return err
			}
			*f.fd = fd
		}
		c.held = h
		return nil
	})
}

// heldFile returns the held descriptor of an interface file, or -1. The caller holds c.mu.
func (c *cgroup) heldFile(name string) int {
	switch h := c.held; {
	case h == nil:
		return -1
	case name == "cgroup.procs":
		return h.procs
	case name == "cgroup.events":
		return h.events
	}
	return -1
}

// close closes the held files and gives their descriptors back to the budget.
func (h *heldFiles) close() {
	for _, fd := range []int{h.procs, h.events} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
