package testproc

// A real top-level window, for tests of what a stop asks of a GUI program. API facts relied on:
//
//	RegisterClassEx, CreateWindowEx   a window belongs to the thread that creates it, and only
//	                                  that thread's message loop receives its messages
//	WM_CLOSE                          DefWindowProc destroys the window; a program may refuse
//	WM_DESTROY, PostQuitMessage       end the message loop
//	Wine                              creates no window at all without a display driver: with no
//	                                  X display, HKCU\Software\Wine\Drivers Graphics=null selects
//	                                  its windowless one, read as a process starts: set it
//	                                  before starting the process that makes a window. The
//	                                  first process to use the desktop starts Wine's desktop
//	                                  process (explorer.exe), which lives on with that process's
//	                                  standard error as its own

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

const (
	_WM_DESTROY = 0x0002
	_WM_CLOSE   = 0x0010
)

var (
	user32                = windows.NewLazySystemDLL("user32.dll")
	procRegisterClassExW  = user32.NewProc("RegisterClassExW")
	procCreateWindowExW   = user32.NewProc("CreateWindowExW")
	procDefWindowProcW    = user32.NewProc("DefWindowProcW")
	procGetMessageW       = user32.NewProc("GetMessageW")
	procDispatchMessageW  = user32.NewProc("DispatchMessageW")
	procPostQuitMessage   = user32.NewProc("PostQuitMessage")
	procDestroyWindow     = user32.NewProc("DestroyWindow")
	procWineGetVersion    = windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version")
	windowOnClose         func() bool
	registerWindowClassOK = sync.OnceValue(registerWindowClass)
)

// Wine reports whether the test runs under Wine rather than Windows.
func Wine() bool { return procWineGetVersion.Find() == nil }

type wndClassEx struct {
	Size, Style                        uint32
	WndProc                            uintptr
	ClsExtra, WndExtra                 int32
	Instance, Icon, Cursor, Background windows.Handle
	MenuName, ClassName                *uint16
	IconSm                             windows.Handle
}

type winMsg struct {
	Hwnd           windows.HWND
	Message        uint32
	WParam, LParam uintptr
	Time           uint32
	Pt             [2]int32
}

var windowClass, _ = windows.UTF16PtrFromString("custody-test-window")

func registerWindowClass() error {
	wc := wndClassEx{WndProc: windows.NewCallback(windowProc), ClassName: windowClass}
	wc.Size = uint32(unsafe.Sizeof(wc))
	if atom, _, err := procRegisterClassExW.Call(uintptr(unsafe.Pointer(&wc))); atom == 0 {
		return os.NewSyscallError("RegisterClassEx", err)
	}
	return nil
}

func windowProc(hwnd windows.HWND, msg uint32, wparam, lparam uintptr) uintptr {
	switch msg {
	case _WM_CLOSE:
		if windowOnClose() {
			procDestroyWindow.Call(uintptr(hwnd))
		}
		return 0
	case _WM_DESTROY:
		procPostQuitMessage.Call(0)
		return 0
	}
	r, _, _ := procDefWindowProcW.Call(uintptr(hwnd), uintptr(msg), wparam, lparam)
	return r
}

// AllowWindows makes sure the processes a test starts can make windows: under Wine with no X
// display it selects Wine's windowless display driver, which the prefix keeps. Call it before
// starting a process that calls [RunWindow]; elsewhere it does nothing. In a fresh prefix the
// driver it names is used only from the next Wine session on (the children of this one fail in
// CreateWindowEx with no error code): CI names it before its tests start.
func AllowWindows() error {
	if !Wine() || os.Getenv("DISPLAY") != "" {
		return nil
	}
	return wineNullDisplay()
}

// RunWindow creates a top-level window, calls ready, and runs its message loop until the window
// is destroyed. Each WM_CLOSE calls onClose, and destroys the window when it returns true. Under
// Wine, the test must have called [AllowWindows] before starting this process.
func RunWindow(ready func(), onClose func() bool) error {
	runtime.LockOSThread() // the window's messages go to the thread that made it
	defer runtime.UnlockOSThread()
	// Under Wine this may start the desktop process: it must not keep the test's pipe open, or
	// the test would wait for this process's output forever. Go's os.Stderr keeps its handle.
	windows.SetStdHandle(windows.STD_ERROR_HANDLE, 0)
	if err := registerWindowClassOK(); err != nil {
		return err
	}
	windowOnClose = onClose
	hwnd, _, err := procCreateWindowExW.Call(0, uintptr(unsafe.Pointer(windowClass)),
		uintptr(unsafe.Pointer(windowClass)), 0, 0, 0, 100, 100, 0, 0, 0, 0)
	if hwnd == 0 {
		return os.NewSyscallError("CreateWindowEx", err)
	}
	ready()
	var m winMsg
	for {
		r, _, err := procGetMessageW.Call(uintptr(unsafe.Pointer(&m)), 0, 0, 0)
		switch int32(r) {
		case 0:
			return nil // WM_QUIT
		case -1:
			return os.NewSyscallError("GetMessage", err)
		}
		procDispatchMessageW.Call(uintptr(unsafe.Pointer(&m)))
	}
}

func wineNullDisplay() error {
	k, _, err := registry.CreateKey(registry.CURRENT_USER, `Software\Wine\Drivers`, registry.QUERY_VALUE|registry.SET_VALUE)
	if err != nil {
		return fmt.Errorf("wine display driver: %w", err)
	}
	defer k.Close()
	if v, _, err := k.GetStringValue("Graphics"); err == nil && v == "null" {
		return nil
	} else if err != nil && !errors.Is(err, registry.ErrNotExist) {
		return fmt.Errorf("wine display driver: %w", err)
	}
	return k.SetStringValue("Graphics", "null")
}
