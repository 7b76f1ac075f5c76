// Package procid reads process incarnations: which process a PID names right now.
//
// A PID alone is observation, never authority: the kernel recycles it as soon as its process is
// reaped. An [ID] pairs the PID with the process's exact start in the OS's native unit, so two
// processes that shared a PID at different times never compare equal:
//
//	OS       exact start ([ID.Start])                      source
//	Linux    clock ticks since boot (with the boot id)     /proc/PID/stat field 22
//	macOS    microseconds since the epoch                  kinfo_proc p_starttime (sysctl)
//	Windows  creation time as a FILETIME (100 ns units)    GetProcessTimes on a process handle
//
// Liveness is three-valued ([State]): a process that cannot be read (another user's process under
// hidepid, a permission error, a read that raced the process's exit) is [Unknown], never dead, and
// unknown never licenses a kill.
//
// Linux start ticks have the resolution of USER_HZ (10 ms): a PID recycled within the same tick
// as its previous holder started is indistinguishable through /proc. Linux 6.9+ closes that gap:
// every process has a pidfs inode, whose number ([ID.PidfdID], fstat(2) of a pidfd) no other
// process of the boot ever gets ([PidfsError] says whether this kernel has them). Where both sides
// of a comparison carry one, it decides: equal is the same process, different another. Elsewhere,
// and for records written by programs that do not record it, the start decides, with its limit:
//
//	OS       exact identity                          remaining limit
//	Linux    pidfs id (6.9+, 64-bit), else start     none with pidfs ids; without, a PID recycled
//	         ticks with the boot id                  within its holder's start tick (10 ms)
//	macOS    start in microseconds                   a PID recycled within the same microsecond
//	Windows  creation FILETIME                       a PID recycled within one system clock tick
//	                                                 (≤ 15.6 ms): the stamp's real resolution
//
// custody signals through handles (pidfd, process handles) wherever it holds one, and uses these
// identities to prove that a freshly opened handle names the recorded process.
package procid

import (
	"errors"
	"fmt"
	"math"
	"os"
)

var (
	// ErrGone reports that no process has the PID, or that it is a zombie: a zombie has exited
	// and only waits to be reaped, so it is dead for every purpose of custody.
	ErrGone = errors.New("procid: process gone")
	// ErrReused reports that the PID now names another incarnation than the one recorded.
	ErrReused = errors.New("procid: pid reused by another process")
)

// ID is a process incarnation's identity: a PID and its exact start in the OS-native unit (see
// the package doc). Start is opaque: compare it, never convert it to wall-clock time.
//
// PidfdID is the process's pidfs id (Linux 6.9+), 0 when not known: [Read] leaves it 0 (it costs
// a pidfd), [ReadExact] and [Self] fill it where the kernel has pidfs ids. When set, it decides
// [ID.Verify].
type ID struct {
	PID     int
	Start   uint64
	PidfdID uint64
}

func (id ID) String() string {
	if id.PidfdID != 0 {
		return fmt.Sprintf("%d@%d/pidfs:%d", id.PID, id.Start, id.PidfdID)
	}
	return fmt.Sprintf("%d@%d", id.PID, id.Start)
}

// Record returns what a record of id holds: its PID, start, pidfs id (when known) and the running
// boot's id, under which an ID read by this process counts (see [BootID]).
func (id ID) Record() Record {
	r := Record{PID: id.PID, StartTicks: &id.Start}
	if boot := bootOrNone(); boot != "" {
		r.BootID = &boot
	}
	if id.PidfdID != 0 {
		r.PidfdID = &id.PidfdID
	}
	return r
}

// Incarnation is everything custody reads about one live process at once.
type Incarnation struct {
	ID
	// BootID names the boot the start ticks count from (Linux; empty elsewhere).
	BootID string
	// CreateTime is the start as epoch seconds, psutil's create_time. On Linux it is
	// btime + ticks/CLK_TCK, exactly as psutil computes it, so rows written by psutil users match.
	CreateTime float64
	// BootStart is the start in seconds since boot (Linux: ticks/CLK_TCK; 0 elsewhere).
	BootStart float64
	// PPID and PGID are the parent and process group at the time of the read.
	PPID, PGID int
	// Zombie reports whether the process has exited and waits to be reaped. [Read] returns
	// [ErrGone] for zombies; [ReadChild] reads them and sets it.
	Zombie bool
}

// Read returns the incarnation the PID names now. It returns an error wrapping [ErrGone] when no
// such process exists or it is a zombie; any other error (permission, a racing exit that left a
// partial read) means the process's state is unknown.
func Read(pid int) (Incarnation, error) {
	if pid <= 0 {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: %w", pid, ErrGone)
	}
	return read(pid)
}

// ReadChild is [Read] for an unreaped child of the caller: a zombie is read too, with Zombie set.
// Until its parent reaps it, a zombie keeps its PID, so the start it reports is still the child's:
// a parent can prove the identity of a child that exited before the parent looked, and cover
// what the child left in its scope instead of losing track of it. On Windows it is Read.
func ReadChild(pid int) (Incarnation, error) {
	if pid <= 0 {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: %w", pid, ErrGone)
	}
	return readChild(pid)
}

// Of returns the incarnation of id, an identity read earlier (by [ReadChild], say), without
// reading the process again: the start alone determines the rest (BootID, CreateTime and BootStart
// as [Read] would report them). PPID and PGID are left zero. A process read once need not be read
// twice, and a second read after the process exited could only fail, or find a stranger that took
// the PID since.
func Of(id ID) (Incarnation, error) { return of(id) }

// living turns a zombie's reading into ErrGone: for everyone but its parent, a zombie is dead.
func living(inc Incarnation, err error) (Incarnation, error) {
	if err == nil && inc.Zombie {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: zombie: %w", inc.PID, ErrGone)
	}
	return inc, err
}

// ReadExact is [Read] plus the process's pidfs id ([ID.PidfdID]) where the kernel has them: it
// opens a pidfd on pid, reads the incarnation, and takes the id from the pidfd, which names the
// incarnation read because the process was alive at the read, after the open. Without pidfs ids
// (see [PidfsError]) it is Read.
func ReadExact(pid int) (Incarnation, error) {
	if pid <= 0 {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: %w", pid, ErrGone)
	}
	return readExact(pid)
}

// Self returns the calling process's incarnation, with its pidfs id where the kernel has them.
func Self() (Incarnation, error) { return selfOnce() }

// Verify reports, with a nil error, that id.PID still names the incarnation id records; otherwise
// it returns an error wrapping [ErrGone] or [ErrReused], or another error when the process cannot
// be read (unknown). Call it at the last moment before acting on a PID.
//
// With id.PidfdID set and pidfs ids available, the pidfs id decides, through a pidfd opened on
// the PID: no /proc read, and a PID recycled within its holder's start tick is told apart.
func (id ID) Verify() error {
	if id.PidfdID != 0 && PidfsError() == nil {
		return verifyPidfs(id)
	}
	inc, err := Read(id.PID)
	if err != nil {
		return err
	}
	if inc.Start != id.Start {
		return fmt.Errorf("procid: verify %v: now %v: %w", id, inc.ID, ErrReused)
	}
	return nil
}

// Exists is the cheap existence check: it reports whether some process (possibly a zombie, or
// another user's) holds the PID. It proves death when false and proves nothing when true.
func Exists(pid int) bool {
	if pid <= 0 {
		return false
	}
	return exists(pid)
}

// PidfsError returns nil when fstat(2) of a pidfd yields an id that no other process of the boot
// ever has (Linux 6.9+ pidfs, on a 64-bit kernel), and otherwise why not: outside Linux an error
// wrapping [errors.ErrUnsupported]. The probe runs once per process; custody doctor shows it.
func PidfsError() error { return pidfsErr() }

// PidfdID returns the pidfs id of the process the pidfd fd names (a pidfd the caller holds open).
// It returns an error wrapping [errors.ErrUnsupported] without pidfs ids.
func PidfdID(fd uintptr) (uint64, error) { return pidfdIDOf(fd) }

// HandleID returns the pidfs id of the process behind p's handle: the pidfd Go took at spawn
// (Linux), so no PID is looked up and no recycling can intervene. It returns an error wrapping
// [errors.ErrUnsupported] without pidfs ids, and one wrapping [os.ErrProcessDone] once p was
// waited for.
func HandleID(p *os.Process) (uint64, error) { return handleID(p) }

// BootID returns the identifier of the running boot: Linux's /proc/sys/kernel/random/boot_id.
// Elsewhere it returns an error wrapping [errors.ErrUnsupported]; records then carry no boot id.
func BootID() (string, error) { return bootID() }

// EpochTolerance is the identity rule for records without an exact start: a live process matches
// a recorded epoch start when they differ by strictly less than this many seconds.
const EpochTolerance = 2.0

// EpochMatch reports whether a live epoch start matches a recorded one under [EpochTolerance].
func EpochMatch(live, recorded float64) bool { return math.Abs(live-recorded) < EpochTolerance }
