package scope

// Resuming a child created with CREATE_SUSPENDED. os/exec closes the thread handle CreateProcess
// returns, so the child's threads are found again. API facts relied on:
//
//	CREATE_SUSPENDED          the primary thread is created with suspend count 1 and runs no
//	                          instruction (not even the loader) until resumed; the process
//	                          cannot start anything meanwhile
//	CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD)   every thread in the system, with its owner pid
//	OpenThread, GetProcessIdOfThread              a thread id is reused once its thread is gone;
//	                          the open handle pins the thread, and its owner is checked through
//	                          it (Vista+), against a pid our unreaped process handle pins
//	ResumeThread              returns the previous suspend count; 0 means it was running
//
// NtResumeProcess (ntdll, undocumented) would resume through the process handle alone, and Wine
// implements it; the documented Toolhelp route is used instead, and works the same under Wine 8
// (its snapshot lists the suspended primary thread) and on Windows.

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

var procGetProcessIdOfThread = windows.NewLazySystemDLL("kernel32.dll").NewProc("GetProcessIdOfThread")

// resume resumes every thread of the suspended process pid once, and fails unless one of them was
// suspended. Only the primary thread exists in a process created suspended, unless a third party
// (a debugger, an anti-virus) injected one: a running one is left alone (ResumeThread on it does
// nothing), one it created suspended would be resumed too.
func resume(pid int) error {
	tids, err := threads(pid)
	if err != nil {
		return err
	}
	resumed := 0
	for _, tid := range tids {
		prev, err := resumeThread(tid, pid)
		if err != nil {
			return err
		}
		if prev > 0 {
			resumed++
		}
	}
	if resumed == 0 {
		return fmt.Errorf("resume pid %d: none of its %d threads was suspended", pid, len(tids))
	}
	return nil
}

// threads returns the ids of pid's threads.
func threads(pid int) ([]uint32, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return nil, os.NewSyscallError("CreateToolhelp32Snapshot", err)
	}
	defer windows.CloseHandle(snap)
	var tids []uint32
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID == uint32(pid) {
			tids = append(tids, te.ThreadID)
		}
	}
	if err != windows.ERROR_NO_MORE_FILES {
		return nil, os.NewSyscallError("Thread32Next", err)
	}
	return tids, nil
}

// resumeThread resumes thread tid if it belongs to pid, and returns its previous suspend count;
// a thread that is gone, or whose id now names another process's thread, is skipped with 0.
func resumeThread(tid uint32, pid int) (uint32, error) {
	th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME|windows.THREAD_QUERY_LIMITED_INFORMATION, false, tid)
	if err == windows.ERROR_INVALID_PARAMETER {
		return 0, nil // gone since the snapshot
	}
	if err != nil {
		return 0, fmt.Errorf("thread %d: %w", tid, os.NewSyscallError("OpenThread", err))
	}
	defer windows.CloseHandle(th)
	owner, _, err := procGetProcessIdOfThread.Call(uintptr(th))
	if owner == 0 {
		return 0, fmt.Errorf("thread %d: %w", tid, os.NewSyscallError("GetProcessIdOfThread", err))
	}
	if int(owner) != pid {
		return 0, nil // the id was reused by a stranger's thread: never touch it
	}
	prev, err := windows.ResumeThread(th)
	if err != nil {
		return 0, fmt.Errorf("thread %d: %w", tid, os.NewSyscallError("ResumeThread", err))
	}
	return prev, nil
}
