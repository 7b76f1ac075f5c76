package authority

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/custody-dev/custody/procid"
)

// ProtectedError reports a process custody never acts on, whatever a record says about it: init,
// a kernel thread, custody itself or one of its ancestors. Signalling init or a kernel thread
// would take the machine down or be meaningless; signalling itself or an ancestor (the shell that
// runs custody, a supervisor above it) would end the very session that asked. It wraps
// [ErrNoAuthority]: nothing was signalled.
type ProtectedError struct {
	PID  int
	What Protection
}

// Protection says why a process is protected.
type Protection string

const (
	Init         Protection = "init"
	KernelThread Protection = "a kernel thread"
	Self         Protection = "custody itself"
	Ancestor     Protection = "an ancestor of custody"
)

func (e *ProtectedError) Error() string {
	return fmt.Sprintf("%v over pid %d: it is %s, which custody never signals", ErrNoAuthority, e.PID, e.What)
}

// Unwrap makes errors.Is(err, ErrNoAuthority) hold.
func (e *ProtectedError) Unwrap() error { return ErrNoAuthority }

// Guard is the one refusal check every act of custody on a recorded PID passes first (stop, reap,
// register). It remembers the caller's ancestry as read when made: a process's ancestors can
// only die (and their PIDs come back as strangers, which a Guard then still refuses, in error on
// the safe side), never be joined by new ones, except a subreaper that was an ancestor already.
type Guard struct{ ancestors []int }

// NewGuard reads the calling process's ancestry, up to init.
func NewGuard() Guard { return Guard{ancestors: ancestors()} }

// Refuse returns a [*ProtectedError] when pid is protected (see [ProtectedError]), else nil.
func (g Guard) Refuse(pid int) error {
	var what Protection
	switch {
	case pid == 1:
		what = Init
	case pid == os.Getpid():
		what = Self
	case slices.Contains(g.ancestors, pid):
		what = Ancestor
	case procid.KernelThread(pid):
		what = KernelThread
	default:
		return nil
	}
	return &ProtectedError{PID: pid, What: what}
}

// Refuse is [NewGuard] followed by [Guard.Refuse].
func Refuse(pid int) error { return NewGuard().Refuse(pid) }

// ancestors lists every process above the caller, up to init, as their PPIDs say now.
func ancestors() []int {
	var out []int
	for pid := os.Getppid(); pid > 0 && pid != os.Getpid() && !slices.Contains(out, pid); {
		out = append(out, pid)
		inc, err := procid.Read(pid)
		if err != nil {
			break
		}
		pid = inc.PPID
	}
	return out
}

// CheckOwner returns nil when pid runs as uid and as nobody else (real, effective and saved user
// ids), and otherwise an error wrapping [ErrNoAuthority] saying whom it runs as; one wrapping
// [procid.ErrGone] when it has exited. A row licenses a signal only to a process of the ledger's
// owner: a row naming another user's process is a claim nobody entitled made. On Windows, which
// has no uids, it returns nil: the process's security descriptor decides, when OpenProcess asks
// it.
func CheckOwner(pid, uid int) error {
	ids, err := procid.Owner(pid)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return nil
	case errors.Is(err, procid.ErrGone):
		return fmt.Errorf("authority: owner of pid %d: %w", pid, err)
	case err != nil:
		return fmt.Errorf("%w over pid %d: cannot read whom it runs as: %v", ErrNoAuthority, pid, err)
	case !ids.Only(uid):
		return fmt.Errorf("%w over pid %d: it runs as %v, not as uid %d", ErrNoAuthority, pid, ids, uid)
	}
	return nil
}
