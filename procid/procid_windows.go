package procid

// Windows reads a process through a handle opened for the read. API facts relied on:
//
//	OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION)  Vista+; granted on other users' and protected
//	                                 processes where PROCESS_QUERY_INFORMATION is refused
//	OpenProcess → ERROR_INVALID_PARAMETER   no process object has the PID
//	OpenProcess ignores a PID's low two bits (PIDs are handle-table indexes, multiples of 4)
//	an exited process stays openable, and its PID unreused, while any handle to it is open
//	GetProcessTimes creation time    FILETIME, 100 ns units since 1601, fixed for the process's
//	                                 life; stamped at system-clock-tick resolution (≤ 15.6 ms)
//	GetExitCodeProcess → STILL_ACTIVE (259)   running, or exited with code 259 (ambiguous)
//	WaitForSingleObject(h, 0) → WAIT_TIMEOUT  running, unambiguously; needs SYNCHRONIZE
//	NtQueryInformationProcess(ProcessBasicInformation).InheritedFromUniqueProcessId
//	                                 the creator's PID: never updated when the creator exits, so
//	                                 it may name a recycled PID (there is no reparenting)
//
// Windows has no boot id and no process groups: BootID is "" and PGID is 0.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/custody-dev/custody/internal/winproc"
	"golang.org/x/sys/windows"
)

// _STILL_ACTIVE is the exit code GetExitCodeProcess reports for a running process (STATUS_PENDING).
const _STILL_ACTIVE = 259

// readChild is read: a process that exited is gone here, whoever holds it.
func readChild(pid int) (Incarnation, error) { return read(pid) }

// of inverts read's start, which is the creation FILETIME as one number.
func of(id ID) (Incarnation, error) {
	created := windows.Filetime{HighDateTime: uint32(id.Start >> 32), LowDateTime: uint32(id.Start)}
	return Incarnation{ID: id, CreateTime: float64(created.Nanoseconds()) / 1e9}, nil
}

func read(pid int) (Incarnation, error) {
	h, synced, err := open(pid)
	if err != nil {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	// A process that exited while someone still holds a handle to it is openable and keeps its
	// PID; it is Windows's zombie, and dead for custody.
	gone, err := exited(h, synced)
	if err != nil {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: %w", pid, err)
	}
	if gone {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: exited: %w", pid, ErrGone)
	}
	created, err := winproc.Created(h)
	if err != nil {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: %w", pid, err)
	}
	ppid, err := parent(h)
	if err != nil {
		return Incarnation{}, fmt.Errorf("procid: read pid %d: %w", pid, err)
	}
	return Incarnation{
		ID:         ID{PID: pid, Start: winproc.Ticks(created)},
		CreateTime: float64(created.Nanoseconds()) / 1e9,
		PPID:       ppid,
	}, nil
}

// open opens pid for querying, with SYNCHRONIZE when the process's DACL grants it (synced
// reports which). Errors wrap [ErrGone] when no process has the PID; ERROR_ACCESS_DENIED
// satisfies errors.Is(err, os.ErrPermission) and means unknown.
func open(pid int) (h windows.Handle, synced bool, err error) {
	const query = windows.PROCESS_QUERY_LIMITED_INFORMATION
	h, granted, err := winproc.Open(pid, query|windows.SYNCHRONIZE, query)
	if errors.Is(err, winproc.ErrNoProcess) {
		return 0, false, fmt.Errorf("%w: %w", err, ErrGone)
	}
	return h, granted&windows.SYNCHRONIZE != 0, err
}

// exited reports whether the process behind h has exited. Without SYNCHRONIZE it trusts the exit
// code, so a process that exited with code 259 (STILL_ACTIVE) reads as running: the error is
// toward alive, which never proves death wrongly, but may keep a dead row until its PID is reused.
func exited(h windows.Handle, synced bool) (bool, error) {
	if synced {
		ev, err := windows.WaitForSingleObject(h, 0)
		switch {
		case err != nil:
			return false, os.NewSyscallError("WaitForSingleObject", err)
		case ev == windows.WAIT_OBJECT_0:
			return true, nil
		case ev == uint32(windows.WAIT_TIMEOUT):
			return false, nil
		}
		return false, fmt.Errorf("WaitForSingleObject: unexpected result %#x", ev)
	}
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return false, os.NewSyscallError("GetExitCodeProcess", err)
	}
	return code != _STILL_ACTIVE, nil
}

// parent returns the PID of the process's creator, which may since have exited and had its PID
// recycled: Windows never reparents.
func parent(h windows.Handle) (int, error) {
	var pbi windows.PROCESS_BASIC_INFORMATION
	err := windows.NtQueryInformationProcess(h, windows.ProcessBasicInformation,
		unsafe.Pointer(&pbi), uint32(unsafe.Sizeof(pbi)), nil)
	if err != nil {
		return 0, os.NewSyscallError("NtQueryInformationProcess", err)
	}
	return int(pbi.InheritedFromUniqueProcessId), nil
}

func bootID() (string, error) {
	return "", fmt.Errorf("procid: boot id on windows: %w", errors.ErrUnsupported)
}

var selfOnce = sync.OnceValues(func() (Incarnation, error) { return Read(os.Getpid()) })
