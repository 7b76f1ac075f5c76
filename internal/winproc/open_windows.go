package winproc

// Opening a process by PID. API facts relied on:
//
//	OpenProcess → ERROR_INVALID_PARAMETER   no process object has the PID
//	OpenProcess → ERROR_ACCESS_DENIED       the process's DACL refuses the access asked for
//	OpenProcess ignores a PID's low two bits (PIDs are handle-table indexes, multiples of 4)
//	an exited process stays openable, and its PID unreused, while any handle to it is open
//	GetProcessTimes creation time           FILETIME, 100 ns units since 1601, fixed for the
//	                                        process's life

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// ErrNoProcess reports that no process has the PID: OpenProcess found no process object, or the
// handle it returned names another PID.
var ErrNoProcess = errors.New("no process has the pid")

// Open opens pid with access, or, when the process's DACL refuses that (another user's or a
// protected process) and fallback is not 0, with fallback; granted is the access the handle
// has. Errors wrap [ErrNoProcess] when no process has the PID; a refusal satisfies
// errors.Is(err, os.ErrPermission).
//
// The handle is checked to name pid itself: OpenProcess(4243) opens process 4240, and
// uint32(pid) truncates a PID read from a corrupt row, so either would name another process.
func Open(pid int, access, fallback uint32) (h windows.Handle, granted uint32, err error) {
	if pid <= 0 || pid > int(^uint32(0)) {
		return 0, 0, fmt.Errorf("OpenProcess(%d): %w", pid, ErrNoProcess)
	}
	granted = access
	h, err = windows.OpenProcess(access, false, uint32(pid))
	if err == windows.ERROR_ACCESS_DENIED && fallback != 0 {
		granted = fallback
		h, err = windows.OpenProcess(fallback, false, uint32(pid))
	}
	if err == windows.ERROR_INVALID_PARAMETER {
		return 0, 0, fmt.Errorf("OpenProcess(%d): %w", pid, ErrNoProcess)
	}
	if err != nil {
		return 0, 0, os.NewSyscallError("OpenProcess", err)
	}
	if got, err := windows.GetProcessId(h); err != nil || int(got) != pid {
		windows.CloseHandle(h)
		if err != nil {
			return 0, 0, os.NewSyscallError("GetProcessId", err)
		}
		return 0, 0, fmt.Errorf("OpenProcess(%d) opened process %d: %w", pid, got, ErrNoProcess)
	}
	return h, granted, nil
}

// Created returns the creation time of the process behind h.
func Created(h windows.Handle) (windows.Filetime, error) {
	var created, exit, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exit, &kernel, &user); err != nil {
		return windows.Filetime{}, os.NewSyscallError("GetProcessTimes", err)
	}
	return created, nil
}

// Ticks is a FILETIME as one number, 100 ns units since 1601: procid's start on Windows.
func Ticks(ft windows.Filetime) uint64 { return uint64(ft.HighDateTime)<<32 | uint64(ft.LowDateTime) }

// Start returns the creation time of the process behind h as [Ticks].
func Start(h windows.Handle) (uint64, error) {
	ft, err := Created(h)
	return Ticks(ft), err
}

var procIsProcessInJob = windows.NewLazySystemDLL("kernel32.dll").NewProc("IsProcessInJob")

// InJob reports whether the process behind h is in job. h needs PROCESS_QUERY_INFORMATION under
// Wine 8; Windows takes PROCESS_QUERY_LIMITED_INFORMATION.
func InJob(h, job windows.Handle) (bool, error) {
	var in int32
	if ok, _, err := procIsProcessInJob.Call(uintptr(h), uintptr(job), uintptr(unsafe.Pointer(&in))); ok == 0 {
		return false, os.NewSyscallError("IsProcessInJob", err)
	}
	return in != 0, nil
}
