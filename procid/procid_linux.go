package procid

// Linux reads /proc. Kernel facts relied on:
//
//	/proc/PID/stat field 22   start time in clock ticks since boot (all kernels since 2.6)
//	/proc/stat btime          boot time in epoch seconds (what psutil's boot_time reads)
//	/proc/sys/kernel/random/boot_id   random per boot (since 2.6.x)
//	AT_CLKTCK in /proc/self/auxv      USER_HZ; 100 on every mainstream architecture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custody-dev/custody/internal/procfs"
	"golang.org/x/sys/unix"
)

// procRoot is where proc(5) is mounted; tests in a new PID namespace mount their own.
var procRoot = "/proc"

func read(pid int) (Incarnation, error) { return living(readChild(pid)) }

func readChild(pid int) (Incarnation, error) {
	buf := statBufs.Get().(*[1024]byte)
	defer statBufs.Put(buf)
	n, err := procfs.ReadSmall(procRoot+"/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		return Incarnation{}, classify(pid, err)
	}
	inc, err := parseStat(buf[:n])
	if err != nil {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: %w", pid, err)
	}
	inc.PID = pid
	return complete(inc)
}

// statBufs holds read buffers: a stack buffer escapes through read(2)'s slice, and a kilobyte of
// garbage per read adds up in a supervisor that runs with the collector off.
var statBufs = sync.Pool{New: func() any { return new([1024]byte) }}

// classify maps a failed /proc read to gone or unknown. ENOENT alone does not prove death: under
// hidepid=1/2 another user's process has no visible /proc entry, so kill(pid, 0) settles it
// (ESRCH: gone; EPERM or success: it exists and is unknown to us). ESRCH from read(2) means the
// process was reaped between open and read.
func classify(pid int, err error) error {
	switch {
	case err == unix.ESRCH:
		return fmt.Errorf("procid: read pid %d: %w", pid, ErrGone)
	case err == unix.ENOENT:
		if !exists(pid) {
			return fmt.Errorf("procid: read pid %d: %w", pid, ErrGone)
		}
		return fmt.Errorf("procid: read pid %d: not visible in %s: %w", pid, procRoot, os.ErrPermission)
	}
	return fmt.Errorf("procid: read pid %d: %w", pid, os.NewSyscallError("read stat", err))
}

// complete adds the machine-wide facts to a parsed stat line.
func of(id ID) (Incarnation, error) { return complete(Incarnation{ID: id}) }

func complete(inc Incarnation) (Incarnation, error) {
	b, err := boot()
	if err != nil {
		return Incarnation{}, err
	}
	btime, err := bootTime()
	if err != nil {
		return Incarnation{}, err
	}
	inc.BootID = b.id
	inc.BootStart = float64(inc.Start) / b.hz
	inc.CreateTime = btime + inc.BootStart
	return inc, nil
}

// bootFacts are the facts that stay fixed for the whole boot. The boot time is not one of them:
// see bootTime.
type bootFacts struct {
	id string
	hz float64
}

var boot = sync.OnceValues(func() (bootFacts, error) {
	id, err := os.ReadFile(procRoot + "/sys/kernel/random/boot_id")
	if err != nil {
		return bootFacts{}, fmt.Errorf("procid: boot id: %w", err)
	}
	return bootFacts{id: string(bytes.TrimSpace(id)), hz: float64(clockTicks())}, nil
})

// bootTime returns /proc/stat's btime, the wall-clock second the machine booted, as psutil reads
// it. The kernel derives btime from the wall clock (CLOCK_REALTIME minus CLOCK_BOOTTIME), so a
// clock step moves it: an NTP step after boot, a VM resumed, WSL2 re-anchoring after the host
// slept. psutil re-reads it on every create_time, so after a step the rows Hermes writes carry
// the new btime. A value read once per process would leave a long-lived owner or supervisor
// computing every create time from the old one: its epoch identities off by the step, every
// epoch-only row another program wrote judged pid-reused, and the create times it writes refused
// by the other program.
//
// Reading /proc/stat per identity would cost more than the identity read itself, so the value
// is kept with the wall clock's offset from the monotonic clock at the moment it was read. Only a
// step changes that offset (slewing moves both clocks alike; a suspend moves it too, and costs a
// harmless re-read), so while it holds, btime has not moved.
func bootTime() (float64, error) {
	skew := clockSkew() // before the read: a step in between then costs one more read, not a stale value
	if c := btime.Load(); c != nil && (skew-c.skew).Abs() < time.Millisecond {
		return c.btime, nil
	}
	stat, err := os.ReadFile(procRoot + "/stat")
	if err != nil {
		return 0, fmt.Errorf("procid: boot time: %w", err)
	}
	v, err := parseBtime(stat)
	if err != nil {
		return 0, err
	}
	btime.Store(&btimeRead{btime: v, skew: skew})
	return v, nil
}

type btimeRead struct {
	btime float64
	skew  time.Duration // clockSkew when btime was read
}

var btime atomic.Pointer[btimeRead]

// clockBase anchors clockSkew: time.Now carries both a wall and a monotonic reading.
var clockBase = time.Now()

// clockSkew is how far the wall clock has moved against the monotonic clock since clockBase:
// zero until the first step or suspend. Two vDSO clock reads.
func clockSkew() time.Duration {
	now := time.Now()
	return now.Round(0).Sub(clockBase.Round(0)) - now.Sub(clockBase)
}

func bootID() (string, error) {
	b, err := boot()
	return b.id, err
}

func parseBtime(stat []byte) (float64, error) {
	for line := range bytes.Lines(stat) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("procid: parse btime: %w", err)
			}
			return float64(n), nil
		}
	}
	return 0, errors.New("procid: parse btime: no btime line in /proc/stat")
}

// clockTicks returns USER_HZ from the auxiliary vector (AT_CLKTCK), as sysconf(_SC_CLK_TCK)
// does; it is 100 on every architecture Go supports, which is the fallback.
func clockTicks() int64 {
	const _AT_CLKTCK = 17
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err == nil {
		for i := 0; i+16 <= len(auxv); i += 16 {
			if binary.NativeEndian.Uint64(auxv[i:]) == _AT_CLKTCK {
				if hz := int64(binary.NativeEndian.Uint64(auxv[i+8:])); hz > 0 {
					return hz
				}
			}
		}
	}
	return 100
}
