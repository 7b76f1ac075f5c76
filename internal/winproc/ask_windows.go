package winproc

// Asking a process to exit, as a user would: Windows has no SIGTERM. API facts relied on:
//
//	EnumWindows               the top-level windows of the caller's desktop
//	GetWindowThreadProcessId  the PID of a window's creator; a console program's console window
//	                          belongs to its console host (conhost.exe), not to the program
//	PostMessage(WM_CLOSE)     what the close button sends; a program may ask the user, refuse,
//	                          or close; refused (ERROR_ACCESS_DENIED) towards a process of higher
//	                          integrity
//	GetConsoleProcessList     the PIDs attached to the caller's console; fails with no console
//	GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, group)
//	                          raises Ctrl+Break in every process of the console process group
//	                          whose id is group that shares the caller's console; a group is made
//	                          by CREATE_NEW_PROCESS_GROUP and its id is its first process's PID
//	                          (CTRL_C_EVENT never reaches such a group: it starts with Ctrl+C
//	                          ignored). A process ends on it by default (exit code
//	                          STATUS_CONTROL_C_EXIT); Go programs see os.Interrupt

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

const (
	_WM_CLOSE = 0x0010
	_GW_OWNER = 4
)

var (
	user32                    = windows.NewLazySystemDLL("user32.dll")
	procPostMessageW          = user32.NewProc("PostMessageW")
	procGetWindow             = user32.NewProc("GetWindow")
	procGetConsoleProcessList = windows.NewLazySystemDLL("kernel32.dll").NewProc("GetConsoleProcessList")
)

// enum collects the windows of one EnumWindows call. Callbacks made by windows.NewCallback are
// never freed and limited in number, so there is one, and calls take turns.
var enum struct {
	sync.Mutex
	pid   uint32
	found []windows.HWND
}

var enumCallback = sync.OnceValue(func() uintptr {
	return windows.NewCallback(func(hwnd windows.HWND, _ uintptr) uintptr {
		var pid uint32
		if _, err := windows.GetWindowThreadProcessId(hwnd, &pid); err == nil && pid == enum.pid {
			// An owned window (a dialog, a tool window) closes with its owner.
			if owner, _, _ := procGetWindow.Call(uintptr(hwnd), _GW_OWNER); owner == 0 {
				enum.found = append(enum.found, hwnd)
			}
		}
		return 1 // go on
	})
})

// TopWindows lists the unowned top-level windows that process pid created on the caller's
// desktop. The caller must hold a handle on the process: only that keeps the PID from naming
// another process by the time the windows are used.
func TopWindows(pid int) ([]windows.HWND, error) {
	enum.Lock()
	defer enum.Unlock()
	enum.pid, enum.found = uint32(pid), nil
	if err := windows.EnumWindows(enumCallback(), nil); err != nil {
		return nil, os.NewSyscallError("EnumWindows", err)
	}
	return enum.found, nil
}

// CloseWindows posts WM_CLOSE to every unowned top-level window of process pid, as its close
// button would, and returns how many it reached. The caller must hold a handle on the process
// (see [TopWindows]).
func CloseWindows(pid int) (int, error) {
	hwnds, err := TopWindows(pid)
	if err != nil {
		return 0, err
	}
	n, lastErr := 0, error(nil)
	for _, hwnd := range hwnds {
		if ok, _, err := procPostMessageW.Call(uintptr(hwnd), _WM_CLOSE, 0, 0); ok != 0 {
			n++
		} else {
			lastErr = os.NewSyscallError("PostMessage", err)
		}
	}
	if n == 0 && lastErr != nil {
		return 0, lastErr
	}
	return n, nil
}

// OnConsole reports whether process pid is attached to the caller's console. A caller without a
// console has no process on it.
func OnConsole(pid int) (bool, error) {
	list := make([]uint32, 64)
	for {
		n, _, err := procGetConsoleProcessList.Call(uintptr(unsafe.Pointer(&list[0])), uintptr(len(list)))
		switch {
		case n == 0 && err == windows.ERROR_INVALID_HANDLE:
			return false, nil // no console
		case n == 0:
			return false, os.NewSyscallError("GetConsoleProcessList", err)
		case int(n) > len(list):
			list = make([]uint32, n+16) // more attached than fit: ask again
			continue
		}
		for _, p := range list[:n] {
			if int(p) == pid {
				return true, nil
			}
		}
		return false, nil
	}
}

// CtrlBreak raises CTRL_BREAK_EVENT in the console process group group. The caller must have
// proven that group is a group's id, made with CREATE_NEW_PROCESS_GROUP for a process it holds a
// handle on, and that this process shares its console ([OnConsole]).
func CtrlBreak(group int) error {
	if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(group)); err != nil {
		return fmt.Errorf("console group %d: %w", group, os.NewSyscallError("GenerateConsoleCtrlEvent", err))
	}
	return nil
}
