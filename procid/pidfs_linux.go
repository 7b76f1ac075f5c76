package procid

// pidfs ids. Kernel facts relied on:
//
//	pidfd_open(2)         5.3   fd is close-on-exec; ESRCH when no process has the PID; opens a
//	                            zombie too (it is reaped, not exited, that frees the PID)
//	pidfs                 6.9   a pidfd is a file of the pidfs filesystem (fstatfs f_type
//	                            PID_FS_MAGIC); its inode number is allocated with the process's
//	                            struct pid from a 64-bit counter, never reused within the boot,
//	                            and every pidfd of one process has the same one. Before 6.9 a
//	                            pidfd is an anonymous inode shared by every pidfd: its number
//	                            names nothing.
//	32-bit kernels              the inode number is 32 bits and wraps; custody does not use it
//	poll on a pidfd       5.3   POLLIN once the process has exited (a zombie has)

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/custody-dev/custody/internal/eintr"
	"golang.org/x/sys/unix"
)

// _PID_FS_MAGIC is pidfs's f_type (include/uapi/linux/magic.h).
const _PID_FS_MAGIC = 0x50494446

var pidfsErr = sync.OnceValue(probePidfs)

// probePidfs checks, on the calling process and its parent, everything the ids rely on: a pidfd
// is a pidfs file, two pidfds of one process share the id, and another process has another.
func probePidfs() error {
	if strconv.IntSize != 64 {
		return fmt.Errorf("procid: pidfs ids: a %d-bit kernel's inode numbers wrap", strconv.IntSize)
	}
	self, err := pidfdID(os.Getpid())
	if err != nil {
		return fmt.Errorf("procid: pidfs ids: %w", err)
	}
	again, err := pidfdID(os.Getpid())
	if err != nil {
		return fmt.Errorf("procid: pidfs ids: %w", err)
	}
	if self != again {
		return fmt.Errorf("procid: pidfs ids: two pidfds of one process have ids %d and %d", self, again)
	}
	// The parent may be gone (or outside the PID namespace, as PID 1's is): nothing to compare.
	if parent, err := pidfdID(os.Getppid()); err == nil && parent == self {
		return fmt.Errorf("procid: pidfs ids: the parent's id is the caller's, %d", self)
	}
	return nil
}

// pidfdID opens a pidfd on pid and returns its pidfs id; an error wrapping [ErrGone] when no
// process has the PID.
func pidfdID(pid int) (uint64, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0, SyscallError("pidfd_open", err)
	}
	defer unix.Close(fd)
	return fdID(fd, true)
}

// fdID returns the pidfs id of the pidfd fd; check also verifies that fd is a pidfs file, which
// the probe needs and every later call may take as known.
func fdID(fd int, check bool) (uint64, error) {
	if check {
		var fs unix.Statfs_t
		if err := unix.Fstatfs(fd, &fs); err != nil {
			return 0, os.NewSyscallError("fstatfs", err)
		}
		if fs.Type != _PID_FS_MAGIC {
			return 0, fmt.Errorf("a pidfd is not a pidfs file (f_type %#x; pidfs is Linux 6.9+)", fs.Type)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, os.NewSyscallError("fstat", err)
	}
	if st.Ino == 0 {
		return 0, errors.New("a pidfd has inode number 0")
	}
	return st.Ino, nil
}

func pidfdIDOf(fd uintptr) (uint64, error) {
	if err := pidfsErr(); err != nil {
		return 0, err
	}
	id, err := fdID(int(fd), false)
	if err != nil {
		return 0, fmt.Errorf("procid: pidfs id: %w", err)
	}
	return id, nil
}

func handleID(p *os.Process) (uint64, error) {
	if err := pidfsErr(); err != nil {
		return 0, err
	}
	var id uint64
	var idErr error
	err := p.WithHandle(func(fd uintptr) { id, idErr = fdID(int(fd), false) })
	switch {
	case err != nil:
		return 0, fmt.Errorf("procid: pidfs id of pid %d: %w", p.Pid, err)
	case idErr != nil:
		return 0, fmt.Errorf("procid: pidfs id of pid %d: %w", p.Pid, idErr)
	}
	return id, nil
}

// pinned is a pidfd opened on a PID before anything was read about it.
type pinned struct {
	pid, fd int
}

// pin opens a pidfd on pid: an error wrapping [ErrGone] when no process has the PID, another when
// no pidfd can be had (the caller then reads without one).
func pin(pid int) (pinned, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return pinned{}, fmt.Errorf("procid: read pid %d: %w", pid, SyscallError("pidfd_open", err))
	}
	return pinned{pid: pid, fd: fd}, nil
}

func (p pinned) close() { unix.Close(p.fd) }

// id returns the pinned process's pidfs id, or [ErrGone] when it has exited (a zombie has).
func (p pinned) id() (uint64, error) {
	id, err := fdID(p.fd, false)
	if err != nil {
		return 0, fmt.Errorf("procid: read pid %d: %w", p.pid, err)
	}
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	n, err := eintr.Retry(func() (int, error) { return unix.Poll(fds, 0) })
	switch {
	case err != nil:
		return 0, fmt.Errorf("procid: read pid %d: %w", p.pid, os.NewSyscallError("poll", err))
	case n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0:
		return 0, fmt.Errorf("procid: read pid %d: exited: %w", p.pid, ErrGone)
	}
	return id, nil
}

func readExact(pid int) (Incarnation, error) {
	if pidfsErr() != nil {
		return read(pid)
	}
	p, err := pin(pid)
	if errors.Is(err, ErrGone) {
		return Incarnation{}, err
	}
	if err != nil { // no descriptor to spare, say: the read alone, without an id
		return read(pid)
	}
	defer p.close()
	inc, err := read(pid)
	if err != nil {
		return inc, err
	}
	// Alive at the read, after the open: the pidfd names the incarnation read.
	inc.PidfdID, err = p.id()
	return inc, err
}

// readPidfs is the cheap liveness read for records that carry a pidfs id: a pidfd, its id and a
// poll for an exit, no /proc text. The incarnation holds the PID, the id and the boot id only.
// Errors other than [ErrGone] mean that this way cannot tell (the caller reads /proc instead).
func readPidfs(pid int) (Incarnation, error) {
	p, err := pin(pid)
	if err != nil {
		return Incarnation{}, err
	}
	defer p.close()
	id, err := p.id()
	if err != nil {
		return Incarnation{}, err
	}
	b, err := boot()
	if err != nil {
		return Incarnation{}, err
	}
	return Incarnation{ID: ID{PID: pid, PidfdID: id}, BootID: b.id}, nil
}

// readPidfsBatch is readPidfs for many PIDs: a pidfd and its id for each, then one poll over
// all of them for exits, then the closes. Each pidfd is opened and its id read before the poll,
// so a process the poll finds running was alive after its id was read: the id names it, as in
// readPidfs. A PID this way cannot tell gets readHow's fallback, a /proc read with the id. The
// poll that one system call per PID would cost was a quarter of a proof's calls.
//
// The opens and closes go through RawSyscall: none can block (a pidfd's close frees no file
// data), so the scheduler need not be told, which it would be twice per PID; and the closes are
// mostly one close_range for the batch.
func readPidfsBatch(pids []int, res []Result) {
	b, err := boot()
	if err != nil {
		for i, pid := range pids {
			res[i] = readHow(pid, howPidfs)
		}
		return
	}
	fds := make([]unix.PollFd, 0, len(pids))
	at := make([]int, 0, len(pids)) // the index in pids of each of fds
	for i, pid := range pids {
		fd, _, errno := unix.RawSyscall(unix.SYS_PIDFD_OPEN, uintptr(pid), 0, 0)
		if errno != 0 {
			err := fmt.Errorf("procid: read pid %d: %w", pid, SyscallError("pidfd_open", errno))
			res[i] = fallback(pid, err)
			continue
		}
		id, err := fdID(int(fd), false)
		if err != nil {
			unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
			res[i] = fallback(pid, err)
			continue
		}
		res[i] = Result{Inc: Incarnation{ID: ID{PID: pid, PidfdID: id}, BootID: b.id}, byPidfs: true}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		at = append(at, i)
	}
	err = pollNow(fds)
	defer closeAll(fds)
	for k, f := range fds {
		i, pid := at[k], pids[at[k]]
		switch {
		case err != nil:
			res[i] = fallback(pid, fmt.Errorf("procid: read pid %d: %w", pid, err))
		case f.Revents&(unix.POLLIN|unix.POLLHUP) != 0:
			res[i] = Result{Err: fmt.Errorf("procid: read pid %d: exited: %w", pid, ErrGone), byPidfs: true}
		case f.Revents != 0: // POLLERR or POLLNVAL: nothing a pidfd of ours reports
			res[i] = fallback(pid, fmt.Errorf("procid: read pid %d: poll: revents %#x", pid, f.Revents))
		}
	}
}

// closeAll closes the pidfds, a run of consecutive descriptors at a time with close_range (Linux
// 5.9; pidfs ids are 6.9): opened one after the other, they mostly are. Every descriptor of a run
// is one of fds, open, so the range holds no other; close_range fails only before it closes
// anything, and the run is then closed one by one.
func closeAll(fds []unix.PollFd) {
	for len(fds) > 0 {
		n := 1
		for n < len(fds) && fds[n].Fd == fds[n-1].Fd+1 {
			n++
		}
		if n == 1 || unix.CloseRange(uint(fds[0].Fd), uint(fds[n-1].Fd), 0) != nil {
			for _, f := range fds[:n] {
				unix.RawSyscall(unix.SYS_CLOSE, uintptr(f.Fd), 0, 0)
			}
		}
		fds = fds[n:]
	}
}

// fallback is readHow's answer for a pidfs read that failed with err: dead when err says so,
// and otherwise a /proc read with the id.
func fallback(pid int, err error) Result {
	if errors.Is(err, ErrGone) {
		return Result{Err: err, byPidfs: true}
	}
	return readHow(pid, howExact)
}

// pollNow polls fds for input without waiting.
func pollNow(fds []unix.PollFd) error {
	if len(fds) == 0 {
		return nil
	}
	_, err := eintr.Retry(func() (int, error) { return unix.Poll(fds, 0) })
	return os.NewSyscallError("poll", err)
}

// verifyPidfs is [ID.Verify] by pidfs id.
func verifyPidfs(id ID) error {
	p, err := pin(id.PID)
	if err != nil {
		return err
	}
	defer p.close()
	now, err := p.id()
	switch {
	case err != nil:
		return err
	case now != id.PidfdID:
		return fmt.Errorf("procid: verify %v: now pidfs id %d: %w", id, now, ErrReused)
	}
	return nil
}

// pidfsReads reports whether liveness may be decided by pidfs ids alone: /proc must not hide
// processes from the caller, since a process it hides is unknown to custody, and a pidfd would
// tell it alive.
func pidfsReads() bool { return pidfsErr() == nil && scanBlind() == nil }

var selfOnce = sync.OnceValues(func() (Incarnation, error) { return ReadExact(os.Getpid()) })
