package procid

// macOS reads the kernel's process table through sysctl(3). API facts relied on:
//
//	sysctl {CTL_KERN, KERN_PROC, KERN_PROC_PID, pid}   one struct kinfo_proc, or an empty reply
//	                                                   when no process has the PID (what psutil
//	                                                   reads as NoSuchProcess)
//	kinfo_proc.kp_proc.p_starttime   struct timeval: the fork time, set once, never changed
//	kinfo_proc.kp_proc.p_stat        SZOMB (5): exited, waiting to be reaped
//	kinfo_proc.kp_eproc.e_ppid, e_pgid   parent and process group at the time of the call
//
// There is no boot id and no pidfd: a caller that signals by PID must check the incarnation
// immediately before the signal, and a tiny window remains in which the PID can be recycled.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// _SZOMB is p_stat of a process that has exited and waits for its parent (sys/proc.h).
const _SZOMB = 5

func read(pid int) (Incarnation, error) { return living(readChild(pid)) }

// of inverts readChild's start, which is p_starttime in microseconds.
func of(id ID) (Incarnation, error) {
	return Incarnation{ID: id, CreateTime: float64(id.Start/1_000_000) + float64(id.Start%1_000_000)/1e6}, nil
}

func readChild(pid int) (Incarnation, error) {
	kp, err := kinfo(pid)
	if err != nil {
		return Incarnation{}, err
	}
	tv := kp.Proc.P_starttime
	if kp.Proc.P_stat == _SZOMB && tv.Sec <= 0 { // a zombie whose start the kernel no longer shows
		return Incarnation{}, fmt.Errorf("procid: read pid %d: zombie: %w", pid, ErrGone)
	}
	// A process still being forked (SIDL) may not have its start stamped yet; a zero start would
	// make every such read compare equal, so it is unknown rather than an identity.
	if tv.Sec <= 0 {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: no start time yet", pid)
	}
	return Incarnation{
		ID:         ID{PID: pid, Start: uint64(tv.Sec)*1_000_000 + uint64(tv.Usec)},
		CreateTime: float64(tv.Sec) + float64(tv.Usec)/1e6,
		PPID:       int(kp.Eproc.Ppid),
		PGID:       int(kp.Eproc.Pgid),
		Zombie:     kp.Proc.P_stat == _SZOMB,
	}, nil
}

// kinfo fetches the PID's kinfo_proc. It uses unix.SysctlRaw rather than unix.SysctlKinfoProc:
// the latter reports the empty reply of a missing process and a reply of the wrong size alike as
// EIO, and reading a layout mismatch as death would license kills on no proof.
func kinfo(pid int) (*unix.KinfoProc, error) {
	buf, err := unix.SysctlRaw("kern.proc.pid", pid)
	switch {
	case errors.Is(err, unix.ESRCH) || err == nil && len(buf) == 0:
		return nil, fmt.Errorf("procid: read pid %d: %w", pid, ErrGone)
	case err != nil:
		// EPERM (a sandbox refusing the query) satisfies errors.Is(err, os.ErrPermission): unknown.
		return nil, fmt.Errorf("procid: read pid %d: %w", pid, os.NewSyscallError("sysctl kern.proc.pid", err))
	case len(buf) != unix.SizeofKinfoProc:
		return nil, fmt.Errorf("procid: read pid %d: sysctl kern.proc.pid: %d bytes, want %d", pid, len(buf), unix.SizeofKinfoProc)
	}
	// Copy rather than cast: a []byte carries no guarantee of kinfo_proc's alignment.
	var kp unix.KinfoProc
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&kp)), unix.SizeofKinfoProc), buf)
	return &kp, nil
}

// bootID is unsupported: macOS records carry no boot id. A record from an earlier boot is told
// apart by its start alone: p_starttime is wall-clock time, so no process of this boot has it
// unless the clock was stepped back to that very microsecond.
func bootID() (string, error) {
	return "", fmt.Errorf("procid: boot id on darwin: %w", errors.ErrUnsupported)
}

var selfOnce = sync.OnceValues(func() (Incarnation, error) { return Read(os.Getpid()) })
