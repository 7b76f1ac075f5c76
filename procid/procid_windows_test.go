package procid

import (
	"errors"
	"math"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/custody-dev/custody/internal/testproc"
)

func init() {
	testproc.Register("exit", func(args []string) int {
		code, _ := strconv.Atoi(args[0])
		return code
	})
}

// startExit starts a helper that exits at once with code.
func startExit(t *testing.T, code int) *testproc.Proc {
	t.Helper()
	return testproc.Start(t, testproc.Helper(t, "exit", strconv.Itoa(code)))
}

// waitExit waits, through a handle of its own, for pid to exit without reaping it: the
// os.Process's handle keeps the exited process object (and its PID) alive until Wait.
func waitExit(t *testing.T, pid int) {
	t.Helper()
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		t.Fatalf("OpenProcess(%d, SYNCHRONIZE): %v", pid, err)
	}
	defer windows.CloseHandle(h)
	if ev, err := windows.WaitForSingleObject(h, 10_000); ev != windows.WAIT_OBJECT_0 {
		t.Fatalf("WaitForSingleObject(%d) = %#x, %v", pid, ev, err)
	}
}

// An exited process whose exit code is STILL_ACTIVE (259) is gone for Read and Exists: they
// decide by WaitForSingleObject, not by the exit code.
func TestExitedWithStillActiveCode(t *testing.T) {
	p := startExit(t, _STILL_ACTIVE)
	pid := p.Process.Pid
	waitExit(t, pid)

	if _, err := Read(pid); !errors.Is(err, ErrGone) {
		t.Errorf("Read(%d) of an exited, unwaited process = %v, want ErrGone", pid, err)
	}
	if Exists(pid) {
		t.Errorf("Exists(%d) of an exited, unwaited process = true", pid)
	}
	// The documented caveat of the fallback without SYNCHRONIZE: exit code 259 reads as running.
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		t.Fatalf("OpenProcess(%d): %v", pid, err)
	}
	defer windows.CloseHandle(h)
	if gone, err := exited(h, true); !gone || err != nil {
		t.Errorf("exited(synced) = %v, %v; want true", gone, err)
	}
	if gone, err := exited(h, false); gone || err != nil {
		t.Errorf("exited(exit code only) = %v, %v; want false (the STILL_ACTIVE caveat)", gone, err)
	}

	err = p.Wait()
	if code := p.ProcessState.ExitCode(); code != _STILL_ACTIVE {
		t.Errorf("helper exit code = %d (%v), want %d", code, err, _STILL_ACTIVE)
	}
}

// With an ordinary exit code, the exit-code fallback proves the exit too.
func TestExitedByExitCode(t *testing.T) {
	p := startExit(t, 3)
	waitExit(t, p.Process.Pid)
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(p.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(h)
	if gone, err := exited(h, false); !gone || err != nil {
		t.Errorf("exited(exit code only) = %v, %v; want true", gone, err)
	}
	if _, err := Read(p.Process.Pid); !errors.Is(err, ErrGone) {
		t.Errorf("Read of an exited, unwaited process = %v, want ErrGone", err)
	}
	p.Wait()
}

// OpenProcess ignores a PID's low two bits; Read must not report process 4240 as PID 4243.
func TestReadLowPIDBits(t *testing.T) {
	pid := startBlocking(t).Process.Pid
	if pid%4 != 0 {
		t.Skipf("skipping: pid %d is not a multiple of 4", pid)
	}
	for _, p := range []int{pid + 1, pid + 2, pid + 3, pid + 1<<32} {
		if h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(p)); err == nil {
			got, _ := windows.GetProcessId(h)
			windows.CloseHandle(h)
			t.Logf("OpenProcess(%d) opened process %d", uint32(p), got)
		} else {
			t.Logf("OpenProcess(%d): %v", uint32(p), err)
		}
		if inc, err := Read(p); !errors.Is(err, ErrGone) {
			t.Errorf("Read(%d) = %v, %v; want ErrGone", p, inc.ID, err)
		}
		if Exists(p) {
			t.Errorf("Exists(%d) = true", p)
		}
	}
}

// Start is the creation FILETIME that the process's own handle reports, and CreateTime is the
// same instant in epoch seconds.
func TestStartIsCreationFiletime(t *testing.T) {
	p := startBlocking(t)
	inc, err := Read(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var created, exit, kernel, user syscall.Filetime
	var timesErr error
	if err := p.Process.WithHandle(func(h uintptr) {
		timesErr = syscall.GetProcessTimes(syscall.Handle(h), &created, &exit, &kernel, &user)
	}); err != nil {
		t.Fatal(err)
	}
	if timesErr != nil {
		t.Fatal(timesErr)
	}
	if want := uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime); inc.Start != want {
		t.Errorf("Start = %d, want the creation FILETIME %d", inc.Start, want)
	}
	const epochFiletime = 116444736000000000 // 1970-01-01 in 100 ns units since 1601
	if want := float64(inc.Start-epochFiletime) / 1e7; math.Abs(inc.CreateTime-want) > 1e-6 {
		t.Errorf("CreateTime = %.7f, want %.7f", inc.CreateTime, want)
	}
	if inc.BootID != "" || inc.PGID != 0 || inc.BootStart != 0 {
		t.Errorf("Read = %+v; want no boot id, pgid or boot start on Windows", inc)
	}
	if _, err := BootID(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("BootID() error = %v, want ErrUnsupported", err)
	}
}
