package scope

// Handing a job to another owner. API facts relied on:
//
//	DuplicateHandle(DUPLICATE_SAME_ACCESS)   makes a handle on the same job in the target process,
//	                          which needs PROCESS_DUP_HANDLE on it (granted for a process of the
//	                          same user); the job lives while either handle is open, so the
//	                          giver's close after the receiver's duplicate never reaches zero
//	                          handles and KILL_ON_JOB_CLOSE does not fire in between
//	IsProcessInJob            proves a handle names the job the leader runs in

import (
	"errors"
	"fmt"
	"os"

	"github.com/custody-dev/custody/internal/winproc"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/windows"
)

// ShareJob duplicates the scope's job handle into process pid and returns the handle's value
// there, for a transfer of the scope to that process. The scope keeps its own handle: the job
// lives until both are closed.
func (s *Scope) ShareJob(pid int) (uintptr, error) {
	s.sys.mu.RLock()
	defer s.sys.mu.RUnlock()
	if s.sys.job == 0 {
		return 0, fmt.Errorf("scope: share %v: %w", s, os.ErrClosed)
	}
	target, _, err := winproc.Open(pid, windows.PROCESS_DUP_HANDLE|windows.PROCESS_QUERY_LIMITED_INFORMATION, 0)
	if err != nil {
		return 0, fmt.Errorf("scope: share %v with pid %d: %w", s, pid, err)
	}
	defer windows.CloseHandle(target)
	var dup windows.Handle
	if err := windows.DuplicateHandle(windows.CurrentProcess(), s.sys.job, target, &dup, 0, false,
		windows.DUPLICATE_SAME_ACCESS); err != nil {
		return 0, fmt.Errorf("scope: share %v with pid %d: %w", s, pid, os.NewSyscallError("DuplicateHandle", err))
	}
	return uintptr(dup), nil
}

// AdoptJob makes the scope of leader from job, a handle on its job object that this process
// holds because the job's previous owner duplicated it here ([Scope.ShareJob]). It proves that
// leader is the incarnation named and runs in that job. The scope takes job: on error it is
// closed, so that a refused transfer leaves no handle keeping the job alive past its giver.
func AdoptJob(job uintptr, leader procid.ID) (_ *Scope, err error) {
	h := windows.Handle(job)
	defer func() {
		if err != nil && h != 0 {
			windows.CloseHandle(h)
		}
	}()
	if h == 0 {
		return nil, fmt.Errorf("scope: adopt job of pid %d: no job handle", leader.PID)
	}
	p, _, err := winproc.Open(leader.PID, memberAccess, 0) // IsProcessInJob: Wine wants PROCESS_QUERY_INFORMATION
	if errors.Is(err, winproc.ErrNoProcess) {
		return nil, fmt.Errorf("scope: adopt job of pid %d: %w", leader.PID, procid.ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("scope: adopt job of pid %d: %w", leader.PID, err)
	}
	defer windows.CloseHandle(p)
	start, err := winproc.Start(p)
	switch {
	case err != nil:
		return nil, fmt.Errorf("scope: adopt job of pid %d: %w", leader.PID, err)
	case start != leader.Start:
		return nil, fmt.Errorf("scope: adopt job of pid %d: %w", leader.PID, procid.ErrGone)
	}
	in, err := winproc.InJob(p, h)
	switch {
	case err != nil:
		return nil, fmt.Errorf("scope: adopt job of pid %d: %w", leader.PID, err)
	case !in:
		return nil, fmt.Errorf("scope: adopt job of pid %d: the handle is not its job", leader.PID)
	}
	return &Scope{leader: leader, sys: sysScope{job: h}}, nil
}
