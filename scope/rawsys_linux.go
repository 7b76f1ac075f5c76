package scope

// The system calls of a sweep's inner loop (reading a held cgroup file, opening, signalling and
// closing a member's pidfd) are made raw: without telling the Go scheduler, which is told of a
// system call in case it blocks. None of these waits on another process; but the kernel may
// preempt the thread inside one, while the processes the sweep signalled compete for the CPUs to
// exit, and the scheduler then hands the thread's P to another thread (a supervisor has one P),
// which the first must wake and wait for when its call returns: a sweep of a thousand cgroups
// made hundreds of such hand-offs, each two context switches more on the busy CPUs.

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func rawPread(fd int, p []byte, off int64) (int, error) {
	r, _, e := syscall.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), uintptr(off), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func rawPidfdOpen(pid int) (int, error) {
	r, _, e := syscall.RawSyscall(unix.SYS_PIDFD_OPEN, uintptr(pid), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func rawPidfdSendSignal(fd int, sig unix.Signal) error {
	_, _, e := syscall.RawSyscall6(unix.SYS_PIDFD_SEND_SIGNAL, uintptr(fd), uintptr(sig), 0, 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func rawClose(fd int) {
	syscall.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}
