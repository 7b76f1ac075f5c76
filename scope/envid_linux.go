package scope

// The environment sweep on Linux. Facts relied on:
//
//	/proc/PID/environ   the environment block the process exec'd with (mm->env_start..env_end),
//	                    readable by its user unless it is non-dumpable (ptrace access mode
//	                    PTRACE_MODE_READ_FSCREDS); unsetenv(3) and clearenv(3) do not change it;
//	                    a kernel thread and a zombie have none (an empty read)
//	/proc/PID's owner   the process's effective uid (root's for a non-dumpable one): a cheap
//	                    filter before the environment is read
//	pidfd_open(2)       5.3; a pidfd names one process for its life, and pidfd_send_signal(2)
//	                    through it fails with ESRCH once it has exited, whatever became of the
//	                    PID; poll(2) on it reports POLLIN once it has exited (5.3)

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/procfs"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// stray is one process found carrying a scope id, held by a pidfd.
type stray struct {
	pid int
	mu  sync.RWMutex // read-held while fd is in use: a closed descriptor's number is reissued
	fd  int          // -1 once closed
}

// environBufs holds the buffers environment blocks are read into: a sweep reads one per process
// of the user, and allocating each would make a sweep over a thousand processes a thousand
// allocations of up to the largest block.
var environBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// findStrays scans /proc for processes of uid carrying one of ids, skipping those held already, and
// proves each through a pidfd (see the file comment of envid.go).
func findStrays(ids []string, uid int, held func(pid int) bool) ([]*stray, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var guard *authority.Guard // read once, at the first match: most sweeps match nothing
	var found []*stray
	bp := environBufs.Get().(*[]byte)
	defer environBufs.Put(bp)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid == os.Getpid() || held(pid) {
			continue
		}
		if !ownedBy(pid, uid) {
			continue
		}
		// The pidfd is opened before the environment is read, so that one read serves for the
		// match and the proof (see proveStray): the read costs the kernel a walk of the other
		// process's memory, a pidfd_open and a close much less.
		fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
		if err != nil {
			continue
		}
		if !environCarries(pid, ids, bp) {
			unix.Close(fd)
			continue
		}
		if guard == nil {
			g := authority.NewGuard()
			guard = &g
		}
		if guard.Refuse(pid) != nil || !strayProven(fd, pid, uid) {
			unix.Close(fd)
			continue
		}
		found = append(found, &stray{pid: pid, fd: fd})
	}
	return found, nil
}

// ownedBy reports whether /proc/PID belongs to uid: the process's effective uid, the filter
// before its environment is read (the proof reads all three of its uids).
func ownedBy(pid, uid int) bool {
	var st unix.Stat_t
	return unix.Stat("/proc/"+strconv.Itoa(pid), &st) == nil && int(st.Uid) == uid
}

// environCarries reports whether pid's environment block carries one of ids, reading it into *bp.
func environCarries(pid int, ids []string, bp *[]byte) bool {
	b, err := readEnviron(pid, (*bp)[:0])
	*bp = b[:0]
	return err == nil && carries(b, ids)
}

// readEnviron appends pid's environment block to b, through the raw descriptor (see procfs): a
// sweep reads one block per process of the user.
func readEnviron(pid int, b []byte) ([]byte, error) {
	return procfs.Append("/proc/"+strconv.Itoa(pid)+"/environ", b)
}

// strayProven reports whether the process fd names is the one whose environment was read after fd was
// opened, and runs as uid (real, effective and saved uids): the pidfd is still alive after the
// reads, so the PID named it throughout, not a stranger that took the PID after the scan.
func strayProven(fd, pid, uid int) bool {
	return authority.CheckOwner(pid, uid) == nil && unix.PidfdSendSignal(fd, 0, nil, 0) == nil
}

// signal sends sig through the pidfd; an error wrapping procid.ErrGone once it has exited.
func (p *stray) signal(sig os.Signal) error {
	us, ok := sig.(unix.Signal)
	if !ok {
		return fmt.Errorf("signal %v: %w", sig, errors.ErrUnsupported)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.fd < 0 {
		return os.ErrClosed
	}
	switch err := unix.PidfdSendSignal(p.fd, us, nil, 0); err {
	case nil:
		return nil
	case unix.ESRCH:
		return fmt.Errorf("pid %d: %w", p.pid, procid.ErrGone)
	default:
		return procid.SyscallError("pidfd_send_signal", err)
	}
}

// exited reports whether the process has exited (a zombie has), from a poll of its pidfd.
func (p *stray) exited() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.fd < 0 {
		return true
	}
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

func (p *stray) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}
