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

	"golang.org/x/sys/unix"
)

// procRoot is where proc(5) is mounted; tests in a new PID namespace mount their own.
var procRoot = "/proc"

func read(pid int) (Incarnation, error) { return living(readChild(pid)) }

func readChild(pid int) (Incarnation, error) {
	buf := statBufs.Get().(*[1024]byte)
	defer statBufs.Put(buf)
	n, err := readSmall(procRoot+"/"+strconv.Itoa(pid)+"/stat", buf[:])
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

// readSmall reads a whole small proc file into buf with three system calls and no os.File: the
// hot path of a verified read of a large ledger is one of these per row, and an owned start's
// read of its child is one. It reads only files the kernel renders whole at the first read
// (/proc/PID/stat and status are single_open seq files), so a read that leaves room in buf has
// returned everything, and the read that would return 0 is not made.
func readSmall(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += m
		if m == 0 || n < len(buf) {
			break
		}
	}
	return n, nil
}

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
	inc.BootID = b.id
	inc.BootStart = float64(inc.Start) / b.hz
	inc.CreateTime = b.btime + inc.BootStart
	return inc, nil
}

type bootFacts struct {
	id    string
	btime float64
	hz    float64
}

var boot = sync.OnceValues(func() (bootFacts, error) {
	id, err := os.ReadFile(procRoot + "/sys/kernel/random/boot_id")
	if err != nil {
		return bootFacts{}, fmt.Errorf("procid: boot id: %w", err)
	}
	stat, err := os.ReadFile(procRoot + "/stat")
	if err != nil {
		return bootFacts{}, fmt.Errorf("procid: boot time: %w", err)
	}
	btime, err := parseBtime(stat)
	if err != nil {
		return bootFacts{}, err
	}
	return bootFacts{id: string(bytes.TrimSpace(id)), btime: btime, hz: float64(clockTicks())}, nil
})

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
