package scope

// The job object itself. API facts relied on:
//
//	CreateJobObject(nil, nil)      an unnamed job; a nil SECURITY_ATTRIBUTES makes the handle
//	                               not inheritable, so no child can hold the job open
//	a job is destroyed when its last handle closes; with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE every
//	process still in it is terminated then, including when the handle closes because its owner
//	exited or was terminated
//	JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION   forces SetErrorMode(SEM_NOGPFAULTERRORBOX) on
//	                               every process in the job: a crashing process ends at once,
//	                               without the Windows Error Reporting dialog that would keep it
//	                               alive (ports and locks held) until someone clicks it away
//	nested jobs                    Windows 8+: a process already in its creator's job can be
//	                               assigned to another; Go 1.26 needs Windows 10, so always
//	QueryInformationJobObject(JobObjectBasicAccountingInformation).ActiveProcesses
//	                               processes in the job that have not exited
//	TerminateJobObject             terminates every process in the job; asynchronous

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// jobLimits are the limits of every custody job. KILL_ON_JOB_CLOSE is the owner-death guarantee.
// DIE_ON_UNHANDLED_EXCEPTION trades the crash dialog, and attaching a debugger from it, for a crash
// that custody sees as an exit: a helper hung in a dialog nobody sees on a headless machine would
// hold its ports and never let a stop observe its exit. (Go programs set SEM_NOGPFAULTERRORBOX
// themselves at start; this extends it to every other program in the job.)
const jobLimits = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | windows.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION

// newJob creates an unnamed, non-inheritable job with [jobLimits].
func newJob() (_ windows.Handle, err error) {
	// Not a named result: "return 0, err" would zero it before the deferred close, which would
	// then close handle 0 and leak the job.
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, os.NewSyscallError("CreateJobObject", err)
	}
	defer func() {
		if err != nil {
			windows.CloseHandle(job)
		}
	}()
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = jobLimits
	_, err = windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)))
	if err != nil {
		return 0, os.NewSyscallError("SetInformationJobObject", err)
	}
	return job, nil
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION (winnt.h), missing from x/sys/windows.
type jobAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

// activeProcesses returns how many processes in the job have not exited.
func activeProcesses(job windows.Handle) (uint32, error) {
	var acct jobAccounting
	err := windows.QueryInformationJobObject(job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil)
	if err != nil {
		return 0, fmt.Errorf("job accounting: %w", os.NewSyscallError("QueryInformationJobObject", err))
	}
	return acct.ActiveProcesses, nil
}
