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
// as its previous holder started is indistinguishable through /proc. That is why custody signals
// through handles (pidfd, process handles) wherever it holds one, and uses start times only to
// prove that a freshly opened handle names the recorded process.
package procid

import (
	"errors"
	"fmt"
	"math"
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
type ID struct {
	PID   int
	Start uint64
}

func (id ID) String() string { return fmt.Sprintf("%d@%d", id.PID, id.Start) }

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
	// [ErrGone] for zombies; the field is set only by the parsers.
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

// Self returns the calling process's incarnation.
func Self() (Incarnation, error) { return selfOnce() }

// Verify reports, with a nil error, that id.PID still names the incarnation id records; otherwise
// it returns an error wrapping [ErrGone] or [ErrReused], or another error when the process cannot
// be read (unknown). Call it at the last moment before acting on a PID.
func (id ID) Verify() error {
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

// BootID returns the identifier of the running boot: Linux's /proc/sys/kernel/random/boot_id.
// Elsewhere it returns an error wrapping [errors.ErrUnsupported]; records then carry no boot id.
func BootID() (string, error) { return bootID() }

// EpochTolerance is the identity rule for records without an exact start: a live process matches
// a recorded epoch start when they differ by strictly less than this many seconds.
const EpochTolerance = 2.0

// EpochMatch reports whether a live epoch start matches a recorded one under [EpochTolerance].
func EpochMatch(live, recorded float64) bool { return math.Abs(live-recorded) < EpochTolerance }
