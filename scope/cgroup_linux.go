package scope

// A cgroup scope is a cgroup v2 directory custody made for one child. Facts relied on:
//
//	kernel  what
//	4.5     cgroup v2; a process's cgroup is the "0::" line of /proc/PID/cgroup
//	5.3     pidfd_open(2); pidfd_send_signal(2) since 5.1
//	5.7     clone3(2) CLONE_INTO_CGROUP (Go: SysProcAttr.UseCgroupFD): the child is born inside
//	5.14    cgroup.kill: writing "1" SIGKILLs every process in the cgroup and its descendants,
//	        and the kernel keeps killing what forks meanwhile: nothing escapes by forking
//
// cgroup.events holds "populated 0|1": 1 while any process lives in the cgroup or below it. A
// process leaves its cgroup when it exits, before its parent reaps it, so a zombie is not a
// member. The file raises POLLPRI when its value changes, so a wait for "empty" needs no scan. A
// process cannot leave its cgroup by setsid(2), setpgid(2) or a double fork; only a write to some
// cgroup.procs moves it, which needs write access to the target and to the common ancestor's
// cgroup.procs. Custody enables no controllers, so processes may live in inner nodes (a nested
// owner's own cgroup holds the owner and the scopes it makes).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/eintr"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// cgroup is one open cgroup v2 directory. The descriptor names the directory custody opened for
// the cgroup's whole life: once removed, a new cgroup at the same path is another directory, and
// every operation checks that the path still leads to this one (see same).
type cgroup struct {
	path string // absolute path in the file system
	rel  string // path below the cgroup2 mount, as /proc/PID/cgroup shows it
	id   uint64 // inode number, which is the kernel's cgroup id
	made *owner // the owner that made it, in this process; nil for a cgroup opened from a row

	mu     sync.Mutex
	fd     int        // O_DIRECTORY; -1 once closed
	held   *heldFiles // interface files a supervisor holds open (see hold); nil when none
	closed bool
	// uncounted: no longer among made's live scopes (removed, or handed to another owner).
	uncounted bool
}

// openCgroup opens the cgroup at rel below the mount h.
func openCgroup(h hierarchy, rel string) (*cgroup, error) {
	path := filepath.Join(h.mount, rel)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil, fmt.Errorf("scope: cgroup %s: %w", rel, procid.ErrGone)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var fs unix.Statfs_t
	var st unix.Stat_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("scope: %s: not a cgroup v2 directory", path)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	return &cgroup{path: path, rel: rel, id: st.Ino, fd: fd}, nil
}

// with runs f on the open descriptor, or fails with os.ErrClosed.
func (c *cgroup) with(f func(fd int) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("scope: cgroup %s: %w", c.rel, os.ErrClosed)
	}
	return f(c.fd)
}

// same reports whether the path still leads to this cgroup. A removed cgroup is gone for good
// (removal needs it empty); its path may have been made again by someone else.
func (c *cgroup) same() bool {
	var st unix.Stat_t
	return unix.Stat(c.path, &st) == nil && st.Ino == c.id
}

// readFile reads one of the cgroup's interface files: the held one from its start, or else one
// opened through the cgroup's descriptor.
func (c *cgroup) readFile(name string) ([]byte, error) {
	var out []byte
	err := c.with(func(dir int) error {
		if fd := c.heldFile(name); fd >= 0 {
			var err error
			out, err = readFrom(fd, name, true)
			return c.fileErr("pread", name, err)
		}
		fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return c.fileErr("openat", name, err)
		}
		defer unix.Close(fd)
		out, err = readFrom(fd, name, false)
		return c.fileErr("read", name, err)
	})
	return out, err
}

// fileErr wraps an interface file's error; ENODEV is what a removed cgroup's files answer.
func (c *cgroup) fileErr(op, name string, err error) error {
	switch err {
	case nil:
		return nil
	case unix.ENODEV, unix.ENOENT:
		return fmt.Errorf("scope: cgroup %s removed: %w", c.rel, procid.ErrGone)
	}
	return &os.PathError{Op: op, Path: filepath.Join(c.path, name), Err: err}
}

// readFrom reads the interface file name open at fd until its end: the end of file, or a read
// that must have been the last (see lastRead). With positioned it reads from the file's start
// (pread, as a held file is read) rather than from its offset.
func readFrom(fd int, name string, positioned bool) ([]byte, error) {
	var buf [4096]byte
	var out []byte
	for {
		n, err := eintr.Retry(func() (int, error) {
			if positioned {
				return rawPread(fd, buf[:], int64(len(out)))
			}
			return unix.Read(fd, buf[:])
		})
		switch {
		case err != nil:
			return nil, err
		case n == 0:
			return out, nil
		}
		out = append(out, buf[:n]...)
		if lastRead(name, n, len(buf)) {
			return out, nil
		}
	}
}

// pidLineMax bounds a line of cgroup.procs: a PID has at most 7 digits (PID_MAX_LIMIT is 2^22),
// and a newline.
const pidLineMax = 8

// lastRead reports whether a read of n bytes into a buffer of size bytes reached the end of the
// interface file name, so that no read needs to find the end. Each file is a seq_file, which
// fills the caller's buffer until it is full, or its records end, or the next record would
// overflow its own buffer (a page, at least 4096 bytes, holding only what this read returns):
//   - cgroup.events and cgroup.stat are one record, read whole by any read that leaves room in
//     the buffer;
//   - cgroup.procs is a record per PID line: a read that leaves room for two more lines stopped
//     at the records' end, not at a full buffer. A sweep reads a scope's members twice, and most
//     scopes have a few: this saves each read its second system call, which walks the members
//     again from the first to find that there are no more.
func lastRead(name string, n, size int) bool {
	switch name {
	case "cgroup.events", "cgroup.stat":
		return n < size
	case "cgroup.procs":
		return n <= size-2*pidLineMax
	}
	return false
}

// populated reports whether any process lives in the cgroup or below it.
func (c *cgroup) populated() (bool, error) {
	b, err := c.readFile("cgroup.events")
	if err != nil {
		return false, err
	}
	return parsePopulated(b)
}

func parsePopulated(events []byte) (bool, error) {
	for line := range bytes.Lines(events) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("populated ")); ok {
			return string(v) != "0", nil
		}
	}
	return false, errors.New("scope: cgroup.events has no populated line")
}

// kill writes cgroup.kill: SIGKILL to every process in the cgroup and below, including those
// forked while the kill runs.
func (c *cgroup) kill() error {
	return c.with(func(dir int) error {
		fd, err := unix.Openat(dir, "cgroup.kill", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return c.fileErr("openat", "cgroup.kill", err)
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte("1"))
		return c.fileErr("write", "cgroup.kill", err)
	})
}

// signal sends sig to every process in the cgroup and below. SIGKILL is cgroup.kill; any other
// signal goes to each member through a pidfd proven to name a member (see prove). It returns an
// error wrapping procid.ErrGone when the cgroup was empty.
func (c *cgroup) signal(sig unix.Signal) error {
	return c.signalNested(sig, c.nested)
}

// signalNested is signal, told by nested whether cgroups may lie below this one (see
// SignalAll: a sweep asks once for all the scopes of one directory).
func (c *cgroup) signalNested(sig unix.Signal, nested func() bool) error {
	if sig == unix.SIGKILL {
		if pop, err := c.populated(); err != nil || !pop {
			if err == nil {
				err = fmt.Errorf("scope: cgroup %s is empty: %w", c.rel, procid.ErrGone)
			}
			return err
		}
		return c.kill()
	}
	p, err := c.prove(nested())
	if err != nil {
		return err
	}
	return p.send(sig)
}

// proven is a cgroup's members, each with a pidfd proven to name it.
type proven struct {
	c    *cgroup
	pids []int
	fds  []int
	err  error // a member that could not be opened, and so is not signalled
}

// prove opens a pidfd on each member of the cgroup and below, and proves that it names a member
// by a second read of the members after the pidfds were opened: a process alive in the cgroup
// after its pidfd was opened is the process the pidfd names (its PID cannot have changed hands
// while it lived), and a PID recycled after the first read to a process outside the cgroup is
// not listed by the second. A process that exits in between is left out, and needs no signal.
// It returns an error wrapping procid.ErrGone when the cgroup is empty. With nested, the members
// of the cgroups below it are listed too.
func (c *cgroup) prove(nested bool) (*proven, error) {
	pids, err := c.members(nested)
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("scope: cgroup %s is empty: %w", c.rel, procid.ErrGone)
	}
	p := &proven{c: c, pids: pids, fds: make([]int, len(pids))}
	for i, pid := range pids {
		switch p.fds[i], err = rawPidfdOpen(pid); err {
		case nil:
		case unix.ESRCH: // exited since the read
		default: // out of descriptors, say: this member cannot be signalled
			if p.err == nil {
				p.err = fmt.Errorf("scope: signal pid %d in cgroup %s: %w", pid, c.rel, os.NewSyscallError("pidfd_open", err))
			}
		}
		if err != nil {
			p.fds[i] = -1
		}
	}
	// The same files as the first read: a nested cgroup made in between holds processes born
	// after that read, which it did not list, or moved there since (by a write to its
	// cgroup.procs), which are left unsignalled, to cgroup.kill.
	again, err := c.members(nested)
	if err != nil {
		p.close()
		return nil, err
	}
	slices.Sort(again)
	for i, pid := range pids {
		if _, listed := slices.BinarySearch(again, pid); !listed && p.fds[i] >= 0 {
			rawClose(p.fds[i])
			p.fds[i] = -1
		}
	}
	return p, nil
}

// send sends sig to the proven members and closes their pidfds.
func (p *proven) send(sig unix.Signal) error {
	defer p.close()
	first := p.err
	for i, fd := range p.fds {
		if fd < 0 {
			continue
		}
		switch err := rawPidfdSendSignal(fd, sig); err {
		case nil, unix.ESRCH:
		default:
			if first == nil {
				first = fmt.Errorf("scope: signal pid %d in cgroup %s: %w", p.pids[i], p.c.rel, os.NewSyscallError("pidfd_send_signal", err))
			}
		}
	}
	return first
}

// close closes the pidfds not yet closed.
func (p *proven) close() {
	for i, fd := range p.fds {
		if fd >= 0 {
			rawClose(fd)
			p.fds[i] = -1
		}
	}
}

// nested reports whether the cgroup may have cgroups below it: whether its directory's link
// count is other than 2, or could not be read. kernfs counts a directory's links as 2 plus its
// subdirectories, and every subdirectory of a cgroup is a cgroup: an fstat(2) of the directory
// answers without cgroup.stat, whose read formats every counter it shows.
func (c *cgroup) nested() bool {
	var st unix.Stat_t
	err := c.with(func(dir int) error { return unix.Fstat(dir, &st) })
	return err != nil || st.Nlink != 2
}

// members lists the processes of the cgroup and, when nested, of the cgroups below it. Most
// scopes have no nested cgroup: their members are one read of cgroup.procs, with no directory
// walk. The supervisor runs with a small heap; a walk per scope at its death would spend it on
// garbage.
func (c *cgroup) members(nested bool) ([]int, error) {
	if !nested {
		b, err := c.readFile("cgroup.procs")
		if err != nil {
			return nil, err
		}
		return appendPIDs(nil, b), nil
	}
	if !c.same() {
		return nil, nil // removed: no members, and the path may name another cgroup now
	}
	var pids []int
	err := filepath.WalkDir(c.path, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) { // a nested scope removed during the walk
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			return err
		}
		pids = appendPIDs(pids, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scope: cgroup %s: members: %w", c.rel, err)
	}
	return pids, nil
}

// appendPIDs appends the PIDs of a cgroup.procs file, one per line.
func appendPIDs(pids []int, b []byte) []int {
	for line := range bytes.Lines(b) {
		n := 0
		for _, ch := range bytes.TrimSpace(line) {
			if ch < '0' || ch > '9' || n > 1<<31/10 {
				n = 0
				break
			}
			n = n*10 + int(ch-'0')
		}
		if n > 0 {
			pids = append(pids, n)
		}
	}
	return pids
}

// wait returns nil once the cgroup is empty or removed (see emptyIfGone), or an error wrapping
// context.Cause(ctx). It sleeps in
// poll(2) on cgroup.events, which raises POLLPRI when "populated" changes; the poll is cut in
// slices so that a cancelled ctx is seen within 50 ms.
func (c *cgroup) wait(ctx context.Context) error {
	var efd int
	err := c.with(func(dir int) (err error) {
		efd, err = unix.Openat(dir, "cgroup.events", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return c.fileErr("openat", "cgroup.events", err)
	})
	if err != nil {
		return emptyIfGone(err)
	}
	defer unix.Close(efd)
	for {
		// Reading the file re-arms POLLPRI for the next change.
		if _, err := unix.Seek(efd, 0, 0); err != nil {
			return emptyIfGone(c.fileErr("seek", "cgroup.events", err))
		}
		b, err := readFrom(efd, "cgroup.events", false)
		if err != nil {
			return emptyIfGone(c.fileErr("read", "cgroup.events", err))
		}
		if pop, err := parsePopulated(b); err != nil || !pop {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("scope: wait cgroup %s: %w", c.rel, context.Cause(ctx))
		}
		slice := 50 * time.Millisecond
		if d, ok := ctx.Deadline(); ok {
			slice = max(min(slice, time.Until(d)), time.Millisecond)
		}
		unix.Poll([]unix.PollFd{{Fd: int32(efd), Events: unix.POLLPRI}}, int(slice.Milliseconds()))
	}
}

// emptyIfGone is wait's reading of a cgroup removed while it is waited for: nil, since only an
// empty cgroup can be removed. Its owner removes it as soon as it has seen it empty (custody run,
// whose child a stop ended, does so at once), often while a stop still waits; the removal shows as
// ENODEV or ENOENT at the next open, seek or read of cgroup.events. Taken for a failure, it made
// such a stop send a needless SIGKILL and report timed-out, "no exit seen after the kill".
func emptyIfGone(err error) error {
	if errors.Is(err, procid.ErrGone) {
		return nil
	}
	return err
}

// teardown kills what is left in the cgroup, waits up to closeWait for it to empty, and removes
// it.
func (c *cgroup) teardown() error {
	if pop, err := c.populated(); err == nil && pop {
		c.kill()
		ctx, cancel := context.WithTimeout(context.Background(), closeWait)
		defer cancel()
		c.wait(ctx)
	}
	return c.remove()
}

// remove removes the cgroup and every cgroup below it (nested owners' empty scopes), deepest
// first, and closes it. It fails, removing what it can, while any of them has a process.
func (c *cgroup) remove() error {
	err := removeTree(c.path, c.id)
	c.close()
	if err != nil {
		return err
	}
	if !c.uncount() {
		// Opened from a row or by a supervisor: the owner may be dead, and its directory is
		// removed with its last scope. While the owner lives, its next scope makes it again.
		if parent := filepath.Dir(c.path); matchOwnerDir(filepath.Base(parent)) != nil {
			unix.Rmdir(parent)
		}
	}
	return nil
}

// disown stops counting a cgroup this process made among its live scopes, leaving it in place:
// it has been handed to another owner, whose to remove it is. Counted on, it would keep this
// process's directory of scopes from ever being removed (see ReleaseOwnerDir), long after the
// other owner had removed the cgroup.
func (c *cgroup) disown() { c.uncount() }

// uncount takes the cgroup off its owner's count of live scopes, once however often it is
// called (a scope closed twice, or handed over and then closed), and reports whether this
// process made it.
func (c *cgroup) uncount() (made bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.made != nil && !c.uncounted {
		c.uncounted = true
		c.made.removed()
	}
	return c.made != nil
}

// removeTree removes the directory tree at path, deepest first, if path is still the cgroup id.
func removeTree(path string, id uint64) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Ino != id {
		return nil // already removed, and maybe made again by someone else
	}
	if unix.Rmdir(path) == nil {
		return nil // no cgroup below it, the common case: no walk
	}
	var dirs []string
	filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var first error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil && err != unix.ENOENT && first == nil {
			first = &os.PathError{Op: "rmdir", Path: dirs[i], Err: err}
		}
	}
	return first
}

func (c *cgroup) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		unix.Close(c.fd)
		c.fd = -1
		if c.held != nil {
			c.held.close()
			c.held = nil
			heldCount.Add(-heldFilesEach)
		}
	}
}

// errNoAuthority is what a cgroup that is not the recorded one answers.
func cgroupNotRecorded(rel string, id, now uint64) error {
	return fmt.Errorf("%w over cgroup %s: %w: its id is %d, recorded %d", authority.ErrNoAuthority, rel, procid.ErrReused, now, id)
}
