package scope

// Asking a job's processes to exit before the job is terminated: Windows has no SIGTERM. The
// requests and the API facts behind them are package winproc's. API facts relied on here:
//
//	QueryInformationJobObject(JobObjectBasicProcessIdList)
//	                    the PIDs of the job's processes: a snapshot, so a listed PID may have
//	                    exited and been recycled by a stranger before it is used
//	IsProcessInJob      through a handle, which pins the process: a listed PID proven in the job
//	                    this way names a member for as long as the handle is held

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/winproc"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/windows"
)

// IsProcessInJob needs PROCESS_QUERY_INFORMATION under Wine 8; Windows takes the limited right.
const memberAccess = windows.PROCESS_QUERY_INFORMATION | windows.SYNCHRONIZE

// ask sends every process in the job the request that can reach it: CTRL_BREAK_EVENT to the
// console process group the child leads, when Prepare made one and the child still runs on the
// caller's console, and WM_CLOSE to the top-level windows of every process in the job.
func (s *Scope) ask() (string, error) {
	s.sys.mu.RLock()
	defer s.sys.mu.RUnlock()
	if s.sys.job == 0 {
		return "", fmt.Errorf("scope: ask %v: %w", s, os.ErrClosed)
	}
	if n, err := activeProcesses(s.sys.job); err != nil || n == 0 {
		if err == nil {
			err = fmt.Errorf("no process left: %w", procid.ErrGone)
		}
		return "", fmt.Errorf("scope: ask %v: %w", s, err)
	}
	var sent, why []string
	if err := s.breakGroup(); err != nil {
		why = append(why, "no CTRL_BREAK_EVENT: "+err.Error())
	} else {
		sent = append(sent, authority.AskCtrlBreak)
	}
	if n, err := closeWindows(s.sys.job); err != nil {
		why = append(why, "no WM_CLOSE: "+err.Error())
	} else if n == 0 {
		why = append(why, "no WM_CLOSE: no process in it has a top-level window")
	} else {
		sent = append(sent, authority.AskWMClose)
	}
	if len(sent) == 0 {
		return "", fmt.Errorf("scope: ask %v: %s: %w", s, strings.Join(why, "; "), errors.ErrUnsupported)
	}
	return strings.Join(sent, "+"), nil
}

// breakGroup raises CTRL_BREAK_EVENT in the console process group the child leads. The group's
// id is the child's PID, and Windows does not check that an id names a group: sent after the
// child's PID was recycled, or for a child that joined its owner's group, the event would reach
// processes outside the scope. So it is sent only for a group Prepare made, while a handle on
// the child, proven by its creation time and its job, pins the PID.
func (s *Scope) breakGroup() error {
	if !s.sys.consoleGroup {
		return errors.New("the child shares its owner's console process group")
	}
	h, _, err := winproc.Open(s.leader.PID, memberAccess, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	start, err := winproc.Start(h)
	if err != nil {
		return err
	}
	if in, err := winproc.InJob(h, s.sys.job); err != nil {
		return err
	} else if !in || start != s.leader.Start {
		return errors.New("the child has exited")
	}
	if ev, _ := windows.WaitForSingleObject(h, 0); ev == windows.WAIT_OBJECT_0 {
		return errors.New("the child has exited")
	}
	if on, err := winproc.OnConsole(s.leader.PID); err != nil {
		return err
	} else if !on {
		return errors.New("the child is not on this process's console")
	}
	return winproc.CtrlBreak(s.leader.PID)
}

// closeWindows posts WM_CLOSE to the top-level windows of every process in job, each opened and
// proven a member first, and returns how many windows it reached.
func closeWindows(job windows.Handle) (int, error) {
	pids, err := members(job)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, pid := range pids {
		n, err := closeMemberWindows(job, pid)
		if err == nil {
			total += n
		}
	}
	return total, nil
}

func closeMemberWindows(job windows.Handle, pid int) (int, error) {
	h, _, err := winproc.Open(pid, memberAccess, 0)
	if err != nil {
		return 0, err
	}
	defer windows.CloseHandle(h) // held while its windows are used: see TopWindows
	if in, err := winproc.InJob(h, job); err != nil || !in {
		return 0, fmt.Errorf("pid %d is not in the job (%v)", pid, err)
	}
	return winproc.CloseWindows(pid)
}

// members lists the PIDs of the job's processes.
func members(job windows.Handle) ([]int, error) {
	// JOBOBJECT_BASIC_PROCESS_ID_LIST: two ULONG counts, then ULONG_PTR ids.
	const head = int(8 / unsafe.Sizeof(uintptr(0)))
	for n := 16; ; n *= 4 {
		buf := make([]uintptr, head+n)
		err := windows.QueryInformationJobObject(job, windows.JobObjectBasicProcessIdList,
			uintptr(unsafe.Pointer(&buf[0])), uint32(len(buf))*uint32(unsafe.Sizeof(buf[0])), nil)
		if err == windows.ERROR_MORE_DATA {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("QueryInformationJobObject", err)
		}
		counts := (*[2]uint32)(unsafe.Pointer(&buf[0]))
		pids := make([]int, 0, counts[1])
		for _, id := range buf[head : head+int(counts[1])] {
			pids = append(pids, int(id))
		}
		return pids, nil
	}
}
