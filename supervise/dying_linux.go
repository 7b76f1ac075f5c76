package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/custody-dev/custody/internal/eintr"
	"golang.org/x/sys/unix"
)

// The supervisor's side of the owner's death told at its start (see deathPage): it waits on its
// word, and its reads of the owner's pipe report errDying once the word is marked and every line
// the pipe holds has been read.

// ownerPipe returns what the supervisor reads its owner's lines from: standard input, through a
// dyingReader when $EnvDeath names a word it can watch. A word it cannot use is logged and left:
// the end of the pipe still tells the death, later.
func ownerPipe(cfg Config) io.Reader {
	spec := os.Getenv(EnvDeath)
	if spec == "" {
		return os.Stdin
	}
	w, err := mapDeathWord(spec)
	if err == nil {
		var r *dyingReader
		if r, err = newDyingReader(int(os.Stdin.Fd()), cfg.withDefaults().Grace); err == nil {
			r.word = w
			go func() {
				done := normalForDeath()
				died := awaitOwnerDied(w)
				done(died)
				if died {
					r.dead()
				}
			}()
			return r
		}
	}
	cfg.Logger.Warn("supervise: owner's death word", "err", err)
	return os.Stdin
}

// mapDeathWord maps the word spec names ($EnvDeath: "<fd>,<offset>").
func mapDeathWord(spec string) (*uint32, error) {
	a, b, ok := strings.Cut(spec, ",")
	fd, err1 := strconv.Atoi(a)
	off, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || fd < 3 || off < deathFirst || off+4 > deathPageSize || off%4 != 0 {
		return nil, fmt.Errorf("%s %q: not a descriptor and a word's offset", EnvDeath, spec)
	}
	mem, err := unix.Mmap(fd, 0, deathPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		return nil, fmt.Errorf("%s: map: %w", EnvDeath, err)
	}
	w := (*uint32)(unsafe.Pointer(&mem[off]))
	if v := atomic.LoadUint32(w); v&futexTIDMask == 0 && v&futexOwnerDied == 0 {
		unix.Munmap(mem)
		return nil, fmt.Errorf("%s: the word names no thread", EnvDeath)
	}
	return w, nil // mapped for the life of the process
}

// awaitOwnerDied waits until the kernel marks w FUTEX_OWNER_DIED and reports true, or returns
// false if the word comes to name no thread (then only the pipe's end tells the death). It sets
// the waiters bit before it sleeps: the kernel wakes a robust futex's waiter only when the bit
// is set. The wait is a shared one (no FUTEX_PRIVATE_FLAG): the owner's thread is in another
// process.
func awaitOwnerDied(w *uint32) bool {
	for {
		v := atomic.LoadUint32(w)
		switch {
		case v&futexOwnerDied != 0:
			return true
		case v&futexTIDMask == 0:
			return false
		case v&futexWaiters == 0 && !atomic.CompareAndSwapUint32(w, v, v|futexWaiters):
			continue
		}
		// EAGAIN (the word changed since it was read) and EINTR only send it round again.
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait, uintptr(v|futexWaiters), 0, 0, 0)
	}
}

// dyingReader reads the owner's pipe and reports errDying, once, when the owner is dying and the
// pipe holds nothing more: every line written before the death began is read first. After that
// it reads on, for a line a thread of the dying owner was still writing, until the end of the
// pipe or, at the latest, until wait has passed.
//
// It reads through the runtime's poller (standard input made non-blocking), not in a blocking
// system call: the supervisor runs on one P, and a goroutine blocked in a system call keeps it
// until the runtime's monitor takes it back, up to milliseconds later, while the goroutine that
// must stop the scopes waits to run.
//
// The wait is armed at the read after the one that reported errDying, not before errDying is
// returned: arming a deadline in the future wakes the runtime's network poller thread, and on a
// machine busy with the owner's death the supervisor then lost its CPU for some 80 µs (median
// over 40 deaths) before it could send a single SIGTERM.
type dyingReader struct {
	f     *os.File
	rc    syscall.RawConn
	wait  time.Duration
	word  *uint32 // the death word; nil in tests that tell the death through dead alone
	dying atomic.Bool
	mu    sync.Mutex // orders dead's wake-up and the report of errDying
	told  bool       // errDying was reported
	armed bool       // the wait is armed; read by the reading goroutine only
}

// newDyingReader reads a duplicate of in, which it makes non-blocking.
func newDyingReader(in int, wait time.Duration) (*dyingReader, error) {
	fd, err := unix.FcntlInt(uintptr(in), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, os.NewSyscallError("dup", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("set non-blocking", err)
	}
	f := os.NewFile(uintptr(fd), "owner pipe") // non-blocking: in the poller
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dyingReader{f: f, rc: rc, wait: wait}, nil
}

// dead tells the reader that the owner is dying, and wakes it.
func (r *dyingReader) dead() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dying.Store(true)
	if !r.told {
		r.f.SetReadDeadline(time.Now())
	}
}

func (r *dyingReader) Read(b []byte) (int, error) {
	if r.told && !r.armed {
		r.armed = true
		r.f.SetReadDeadline(time.Now().Add(r.wait))
	}
	for {
		var n int
		var rerr error
		err := r.rc.Read(func(fd uintptr) bool {
			n, rerr = eintr.Retry(func() (int, error) { return unix.Read(int(fd), b) })
			// Nothing to read: wait for more, unless the owner is dying and that is yet to be said.
			return rerr != unix.EAGAIN || r.dying.Load() && !r.told
		})
		switch {
		case err == nil && rerr == nil && n == 0 && !r.told && r.marked():
			// The end of the pipe came before the word's waiter said so: on a busy machine it
			// may not have run yet. A dying owner's word is marked before its files close (each
			// thread's robust list is walked before its files are let go, and the pipe closes
			// with the last thread's), so a marked word at the end is a death, not a release.
			r.mu.Lock()
			r.dying.Store(true)
			r.told = true
			r.mu.Unlock()
			return 0, errDying
		case err == nil && rerr == nil && n == 0:
			return 0, io.EOF
		case err == nil && rerr == nil:
			return n, nil
		case err == nil && rerr == unix.EAGAIN:
			r.mu.Lock()
			r.told = true
			r.mu.Unlock()
			return 0, errDying
		case err == nil:
			return 0, os.NewSyscallError("read", rerr)
		case errors.Is(err, os.ErrDeadlineExceeded) && !r.told:
			r.f.SetReadDeadline(time.Time{}) // dead's wake-up: read again, now that it is known
		case errors.Is(err, os.ErrDeadlineExceeded):
			return 0, errDyingOpen
		default:
			return 0, err
		}
	}
}

// marked reports whether the kernel has marked the death word FUTEX_OWNER_DIED.
func (r *dyingReader) marked() bool {
	return r.word != nil && atomic.LoadUint32(r.word)&futexOwnerDied != 0
}

// errDyingOpen ends the reading of a dying owner's pipe that is still open when its wait is
// over: only a process that holds a copy of its write end, which the owner never hands out, could
// keep it open that long.
var errDyingOpen = errors.New("the owner died but its pipe is still open")
