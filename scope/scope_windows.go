package scope

// Windows scopes are job objects (job_windows.go), entered before the child runs (this file) and
// resumed after (resume_windows.go). API facts relied on:
//
//	PROC_THREAD_ATTRIBUTE_JOB_LIST   would start the child inside the job, but os/exec offers no
//	                          way to pass it; CREATE_SUSPENDED + assign + resume has no window
//	                          either: the child runs nothing, and starts nothing, before the resume
//	os.Process.WithHandle     the handle CreateProcess returned (PROCESS_ALL_ACCESS, so it has the
//	                          PROCESS_SET_QUOTA|PROCESS_TERMINATE that AssignProcessToJobObject
//	                          needs); it names the child until os/exec waits for it
//	AssignProcessToJobObject  the child's descendants are born into the job and cannot leave it:
//	                          breakaway needs JOB_OBJECT_LIMIT_BREAKAWAY_OK, never set here
//	TerminateProcess          through the handle, for a child whose attach failed
//
// Console process groups, which only console control events (Ctrl+C, Ctrl+Break) use. API facts
// relied on:
//
//	CREATE_NEW_PROCESS_GROUP   the child leads a new console process group and starts with Ctrl+C
//	                           ignored (RTL_USER_PROCESS_PARAMETERS.ConsoleFlags bit 0, inherited
//	                           by its descendants); Ctrl+Break still reaches it
//	Ctrl+C, Ctrl+Break typed   delivered to every process attached to the console, whatever its
//	                           group; a process that ignores Ctrl+C never sees it
//	no CREATE_NEW_PROCESS_GROUP   the child joins its creator's group with its creator's Ctrl+C
//	                           setting
//
// Job membership does not depend on any of it: a child that shares its owner's console group is
// still in its own job, and dies with it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/custody-dev/custody/internal/winproc"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/windows"
)

type sysScope struct {
	mu  sync.RWMutex   // read-held while job is in use; Close takes it for writing
	job windows.Handle // 0 after Close: a closed handle's value can be reissued to another object
	// consoleGroup: the child leads a console process group of its own, made by Prepare
	// (CREATE_NEW_PROCESS_GROUP), so a console control event can be sent to it alone.
	consoleGroup bool
}

func prepare(cmd *exec.Cmd, sharedConsole bool, _ *Reservation) (preparation, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_SUSPENDED
	if !sharedConsole { // see PrepareSharedConsole
		cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP
	}
	return jobPrep{}, nil
}

// jobPrep prepares a job scope: the job is made at the attach, and the child, suspended until
// then, runs nothing before it is inside.
type jobPrep struct{}

func (jobPrep) desc() Desc { return Desc{} }
func (jobPrep) abandon()   {}

func (jobPrep) attach(cmd *exec.Cmd, _ procid.Span, _ bool) (s *Scope, err error) {
	pid := cmd.Process.Pid
	if a := cmd.SysProcAttr; a == nil || a.CreationFlags&windows.CREATE_SUSPENDED == 0 {
		return nil, fmt.Errorf("scope: attach pid %d: %w", pid, ErrNotPrepared)
	}
	job, err := newJob()
	if err != nil {
		return nil, fmt.Errorf("scope: attach pid %d: %w", pid, err)
	}
	defer func() {
		if err != nil {
			windows.CloseHandle(job) // KILL_ON_JOB_CLOSE: ends the child too if it was assigned
		}
	}()
	var leader procid.ID
	var enterErr error
	if err := cmd.Process.WithHandle(func(h uintptr) {
		leader, enterErr = enter(job, windows.Handle(h), pid)
	}); err != nil {
		return nil, fmt.Errorf("scope: attach pid %d: %w", pid, err)
	}
	if enterErr != nil {
		return nil, fmt.Errorf("scope: attach pid %d: %w", pid, enterErr)
	}
	group := cmd.SysProcAttr.CreationFlags&windows.CREATE_NEW_PROCESS_GROUP != 0
	return &Scope{leader: leader, sys: sysScope{job: job, consoleGroup: group}}, nil
}

// enter assigns the suspended process h to job, reads its incarnation, and resumes it.
func enter(job, h windows.Handle, pid int) (procid.ID, error) {
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		return procid.ID{}, os.NewSyscallError("AssignProcessToJobObject", err)
	}
	start, err := winproc.Start(h)
	if err != nil {
		return procid.ID{}, err
	}
	if err := resume(pid); err != nil {
		return procid.ID{}, err
	}
	return procid.ID{PID: pid, Start: start}, nil
}

// abort terminates a child whose attach failed, through its handle.
func abort(cmd *exec.Cmd) { cmd.Process.Kill() }

func fromGroup(pgid int, leader procid.ID) (*Scope, error) {
	return nil, fmt.Errorf("scope: process group %d on windows: %w", pgid, errors.ErrUnsupported)
}

func (s *Scope) emptyIn(*Census) (bool, error) { return s.empty() }

func groupSignalError() error {
	return fmt.Errorf("scope: process groups on windows: %w", errors.ErrUnsupported)
}

func bindGroup(pgid int, leader procid.ID) (*Scope, error) { return fromGroup(pgid, leader) }

func (s *Scope) pgid() int { return 0 }

func (s *Scope) signalGroup(os.Signal) error {
	return fmt.Errorf("scope: signal the process group of %v: %w", s, errors.ErrUnsupported)
}

// pinned: a job handle never names another job.
func (s *Scope) pinned() bool {
	s.sys.mu.RLock()
	defer s.sys.mu.RUnlock()
	return s.sys.job != 0
}

// signal terminates the job for os.Kill. An empty job is reported gone whatever the signal, before
// an unsupported one is refused: a refusal would send a stop on to the kill, which would then
// report a child that had exited before the stop as exited after it (forced), not as
// already-exited.
func (s *Scope) signal(sig os.Signal) error {
	s.sys.mu.RLock()
	defer s.sys.mu.RUnlock()
	if s.sys.job == 0 {
		return fmt.Errorf("scope: signal %v: %w", s, os.ErrClosed)
	}
	n, err := activeProcesses(s.sys.job)
	switch {
	case err != nil:
		return fmt.Errorf("scope: signal %v: %w", s, err)
	case n == 0:
		return fmt.Errorf("scope: signal %v: no process left: %w", s, procid.ErrGone)
	case sig != os.Kill:
		return fmt.Errorf("scope: signal %v with %v: %w", s, sig, errors.ErrUnsupported)
	}
	if err := windows.TerminateJobObject(s.sys.job, 1); err != nil {
		// ERROR_ACCESS_DENIED satisfies errors.Is(err, os.ErrPermission).
		return fmt.Errorf("scope: signal %v: %w", s, os.NewSyscallError("TerminateJobObject", err))
	}
	return nil
}

func (s *Scope) empty() (bool, error) {
	s.sys.mu.RLock()
	defer s.sys.mu.RUnlock()
	if s.sys.job == 0 {
		return false, fmt.Errorf("scope: %v: %w", s, os.ErrClosed)
	}
	n, err := activeProcesses(s.sys.job)
	if err != nil {
		return false, fmt.Errorf("scope: %v: %w", s, err)
	}
	return n == 0, nil
}

func (s *Scope) close() error {
	s.sys.mu.Lock()
	defer s.sys.mu.Unlock()
	if s.sys.job == 0 {
		return nil
	}
	err := windows.CloseHandle(s.sys.job)
	s.sys.job = 0
	if err != nil {
		return fmt.Errorf("scope: close %v: %w", s, os.NewSyscallError("CloseHandle", err))
	}
	return nil
}

func (s *Scope) describe() string { return fmt.Sprintf("job of pid %d", s.leader.PID) }

func (s *Scope) kind() Kind { return KindJob }

func (s *Scope) wait(ctx context.Context) error { return s.pollEmpty(ctx) }

func (s *Scope) desc() Desc { return Desc{Kind: KindJob, Leader: s.leader} }

// open refuses every description: a job can be opened by another process only by name, and
// custody's jobs have none (see FromGroup).
func open(d Desc) (*Scope, error) {
	return nil, fmt.Errorf("scope: open %q scope on windows: %w", d.Kind, errors.ErrUnsupported)
}

func openCgroupPath(path string) (*Scope, error) {
	return nil, fmt.Errorf("scope: cgroup %s on windows: %w", path, errors.ErrUnsupported)
}

func preparedCgroup(*exec.Cmd) string { return "" }

func abandon(*exec.Cmd) {}

// containment is a job: every child gets one (nested in the owner's, when the owner runs in one).
func containment() (Kind, string, error) { return KindJob, "", nil }

func (s *Scope) release() error { return s.close() }

func leftovers() ([]Leftover, error) { return nil, nil }

func releaseOwnerDir() {}

func removeLeftover(Leftover) error {
	return fmt.Errorf("scope: cgroups on windows: %w", errors.ErrUnsupported)
}

func removeDeadOwner(context.Context, string) error {
	return fmt.Errorf("scope: cgroups on windows: %w", errors.ErrUnsupported)
}

func removeDeadOwnerDir(context.Context, string) error {
	return fmt.Errorf("scope: cgroups on windows: %w", errors.ErrUnsupported)
}

func ownerDir() string { return "" }
