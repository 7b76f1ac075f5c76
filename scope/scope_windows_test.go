package scope_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"golang.org/x/sys/windows"
)

var (
	kernel32                 = windows.NewLazySystemDLL("kernel32.dll")
	procIsProcessInJob       = kernel32.NewProc("IsProcessInJob")
	procSuspendThread        = kernel32.NewProc("SuspendThread")
	procGetHandleInformation = kernel32.NewProc("GetHandleInformation")
)

func init() {
	// console reports whether it ignores the console's Ctrl+C (ConsoleFlags bit 0), then blocks on
	// its lifeline.
	testproc.Register("console", func([]string) int {
		fmt.Println("ctrl-c-ignored", windows.RtlGetCurrentPeb().ProcessParameters.ConsoleFlags&1 != 0)
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
}

// detach is Unix's setsid; no test asks for it on Windows.
func detach(*exec.Cmd) { panic("detach on windows") }

// cleanupScope closes the job, which kills what a test left in it.
func cleanupScope(s *scope.Scope) { s.Close() }

// openProven opens a process the test did not start and proves it is id.
func openProven(t *testing.T, id procid.ID) windows.Handle {
	t.Helper()
	// IsProcessInJob needs PROCESS_QUERY_INFORMATION under Wine 8; Windows takes the limited right.
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_INFORMATION, false, uint32(id.PID))
	if err != nil {
		t.Fatalf("OpenProcess(%d): %v", id.PID, err)
	}
	t.Cleanup(func() { windows.CloseHandle(h) })
	var created, exit, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exit, &kernel, &user); err != nil {
		t.Fatalf("GetProcessTimes(%d): %v", id.PID, err)
	}
	if start := uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime); start != id.Start {
		t.Fatalf("pid %d created at %d, reported %v", id.PID, start, id)
	}
	return h
}

// inJob reports whether process h is in job (any job when job is 0).
func inJob(t *testing.T, h, job windows.Handle) bool {
	t.Helper()
	var in int32
	if r, _, err := procIsProcessInJob.Call(uintptr(h), uintptr(job), uintptr(unsafe.Pointer(&in))); r == 0 {
		t.Fatalf("IsProcessInJob: %v", err)
	}
	return in != 0
}

func TestJobContainsTree(t *testing.T) {
	p, s := startScoped(t, "-depth", "1")
	ids := ready(t, p)
	child, grand := ids[0], ids[1]
	if s.Kind() != scope.KindJob || s.PGID() != 0 || s.Leader() != child {
		t.Fatalf("scope %v: kind %q pgid %d leader %v; want job, 0, %v", s, s.Kind(), s.PGID(), s.Leader(), child)
	}
	job := scope.JobHandle(s)
	for _, id := range ids {
		if !inJob(t, openProven(t, id), job) {
			t.Fatalf("pid %d is not in the job", id.PID)
		}
	}
	if inJob(t, windows.CurrentProcess(), job) {
		t.Fatal("the test process is in its child's job")
	}
	var flags uint32
	if r, _, err := procGetHandleInformation.Call(uintptr(job), uintptr(unsafe.Pointer(&flags))); r == 0 {
		t.Fatalf("GetHandleInformation: %v", err)
	}
	if flags&windows.HANDLE_FLAG_INHERIT != 0 {
		t.Fatal("the job handle is inheritable: a child could keep the job alive")
	}
	if empty, err := s.Empty(); err != nil || empty {
		t.Fatalf("Empty() = %v, %v with two members", empty, err)
	}
	mustIs(t, s.Signal(os.Interrupt), errors.ErrUnsupported)

	ca, ga := acquire(t, child), acquire(t, grand)
	if err := s.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, ca, ga)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if empty, err := s.Empty(); err != nil || !empty {
		t.Fatalf("Empty() = %v, %v after TerminateJobObject", empty, err)
	}
	mustIs(t, s.Signal(os.Kill), procid.ErrGone)
	mustIs(t, s.Signal(os.Interrupt), procid.ErrGone) // gone first: a stop's SIGTERM sees it
	if err := p.Wait(); err == nil || p.ProcessState.ExitCode() != 1 {
		t.Fatalf("child ended with %v, want exit code 1 from TerminateJobObject", p.ProcessState)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	mustIs(t, s.Signal(os.Kill), os.ErrClosed)
	_, err := s.Empty()
	mustIs(t, err, os.ErrClosed)
}

// The child runs no instruction before Attach: created suspended, resumed only once in the job.
func TestChildSuspendedUntilAttach(t *testing.T) {
	mark := tempFile(t, "ran")
	cmd := tree(t, "-mark", mark)
	prep, err := scope.Prepare(cmd)
	if err != nil {
		t.Fatal(err)
	}
	const want = windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP
	if cmd.SysProcAttr.CreationFlags&want != want {
		t.Fatalf("CreationFlags %#x, want %#x set", cmd.SysProcAttr.CreationFlags, want)
	}
	p := testproc.Start(t, cmd)
	tids, err := scope.Threads(p.Process.Pid)
	if err != nil || len(tids) == 0 {
		t.Fatalf("threads of the started child: %v, %v", tids, err)
	}
	for _, tid := range tids {
		if n := suspendCount(t, tid); n != 1 {
			t.Fatalf("thread %d of the unattached child has suspend count %d, want 1", tid, n)
		}
	}
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unattached child ran: stat %s: %v", mark, err)
	}
	s, err := prep.Attach()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupScope(s) })
	ready(t, p)
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the attached child reported ready without running: %v", err)
	}
	if !inJob(t, openProven(t, s.Leader()), scope.JobHandle(s)) {
		t.Fatal("the attached child is not in the job")
	}
	p.Stdin().Close()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
}

// suspendCount reads a thread's suspend count: SuspendThread returns it, ResumeThread undoes it.
func suspendCount(t *testing.T, tid uint32) uint32 {
	t.Helper()
	th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, tid)
	if err != nil {
		t.Fatalf("OpenThread(%d): %v", tid, err)
	}
	defer windows.CloseHandle(th)
	r, _, err := procSuspendThread.Call(uintptr(th))
	if uint32(r) == ^uint32(0) {
		t.Fatalf("SuspendThread(%d): %v", tid, err)
	}
	if _, err := windows.ResumeThread(th); err != nil {
		t.Fatalf("ResumeThread(%d): %v", tid, err)
	}
	return uint32(r)
}

// Closing the job handle kills every process still in it.
func TestCloseKillsJob(t *testing.T) {
	p, s := startScoped(t, "-depth", "1")
	ids := ready(t, p)
	ca, ga := acquire(t, ids[0]), acquire(t, ids[1])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, ca, ga)
	p.Wait()
}

// The owner's death closes its job handle, whatever the cause: here TerminateProcess, which runs
// no code of the owner's. Its child and grandchild die with it (custody's promise: a child dies with its owner), though their
// lifeline, the test's stdin pipe, stays open. An owner that is itself in a job (a CI runner's,
// or its own owner's) nests its children's job inside it: Windows 8+ and Wine 8 support that.
func TestOwnerDeathKillsJob(t *testing.T) {
	t.Run("owner outside a job", func(t *testing.T) {
		testOwnerDeath(t, testproc.Start(t, tree(t, "-scope", "-depth", "2")), 0)
	})
	t.Run("owner in a job", func(t *testing.T) {
		// The test holds the outer job open throughout: only the inner one can kill.
		owner, outer := startScoped(t, "-scope", "-depth", "2")
		testOwnerDeath(t, owner, scope.JobHandle(outer))
	})
}

// testOwnerDeath kills the owner and watches its descendants die; outer, when not 0, is a job
// they must be in besides the owner's own.
func testOwnerDeath(t *testing.T, owner *testproc.Proc, outer windows.Handle) {
	ids := ready(t, owner)
	child, grand := ids[1], ids[2]
	ca, ga := acquire(t, child), acquire(t, grand)
	for _, id := range ids[1:] {
		h := openProven(t, id)
		if !inJob(t, h, 0) {
			t.Fatalf("pid %d is in no job", id.PID)
		}
		if outer != 0 && !inJob(t, h, outer) {
			t.Fatalf("pid %d left the outer job: its job is not nested", id.PID)
		}
	}
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, ca, ga)
	owner.Wait()
	for _, id := range ids[1:] {
		if err := id.Verify(); !errors.Is(err, procid.ErrGone) {
			t.Fatalf("%v after the owner's death: %v, want gone", id, err)
		}
	}
}

func TestFromGroupUnsupported(t *testing.T) {
	_, err := scope.FromGroup(os.Getpid(), procid.ID{})
	mustIs(t, err, errors.ErrUnsupported)
}

// tempFile returns the path of a file that does not exist yet, in a directory removed at cleanup
// (see testproc.TempDir).
func tempFile(t *testing.T, name string) string {
	return filepath.Join(testproc.TempDir(t), name)
}

// By default a child starts in a new console process group, ignoring Ctrl+C: the owner decides
// what stops it. PrepareSharedConsole keeps it in the caller's group, taking Ctrl+C, and in its
// own job.
func TestShareConsole(t *testing.T) {
	for _, share := range []bool{false, true} {
		cmd := testproc.Helper(t, "console")
		prepare := scope.Prepare
		if share {
			prepare = scope.PrepareSharedConsole
		}
		prep, err := prepare(cmd)
		if err != nil {
			t.Fatal(err)
		}
		flags := cmd.SysProcAttr.CreationFlags
		if flags&windows.CREATE_SUSPENDED == 0 || (flags&windows.CREATE_NEW_PROCESS_GROUP == 0) != share {
			t.Fatalf("ShareConsole %v: CreationFlags %#x", share, flags)
		}
		p := testproc.Start(t, cmd)
		s, err := prep.Attach()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cleanupScope(s) })
		if f := p.Expect("ctrl-c-ignored ", 30*time.Second); len(f) != 1 || f[0] != fmt.Sprint(!share) {
			t.Errorf("ShareConsole %v: the child reports ctrl-c-ignored %v", share, f)
		}
		if !inJob(t, openProven(t, s.Leader()), scope.JobHandle(s)) {
			t.Errorf("ShareConsole %v: the child is not in its job", share)
		}
		p.Stdin().Close()
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// The outer owner's teardown reaches a nested owner's job: the nested owner (in the outer job)
// made its child's job inside the outer one, so terminating the outer job ends all three.
func TestOuterTeardownKillsNestedJob(t *testing.T) {
	p, outer := startScoped(t, "-scope", "-depth", "2")
	ids := ready(t, p)
	var as []*authority.Process
	for _, id := range ids {
		as = append(as, acquire(t, id))
	}
	if err := outer.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	waitExit(t, 30*time.Second, as...)
	p.Wait()
}
