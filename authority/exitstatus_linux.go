package authority

// Kernel facts relied on (include/uapi/linux/pidfd.h):
//
//	PIDFD_GET_INFO    6.13   ioctl on a pidfd filling struct pidfd_info; its size is in the
//	                         command, 64 bytes (PIDFD_INFO_SIZE_VER0) reach exit_code
//	PIDFD_INFO_EXIT   6.15   set in the returned mask once the process has been reaped, with
//	                         exit_code the wait(2) status; absent before the reap, and on older
//	                         kernels, which ignore the bit
//	ENOTTY / EINVAL          a kernel without PIDFD_GET_INFO
//	ESRCH                    the process is being reaped (its task found, its pid detached),
//	                         or is outside the caller's pid namespace

import (
	"context"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	_PIDFD_INFO_EXIT = 1 << 3
	// _PIDFD_GET_INFO is _IOWR(0xFF, 11, struct pidfd_info) for the 64-byte first version.
	_PIDFD_GET_INFO = 0xC040FF0B
)

// pidfdInfo is struct pidfd_info up to exit_code (PIDFD_INFO_SIZE_VER0).
type pidfdInfo struct {
	mask, cgroupID                                                    uint64
	pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid uint32
	exitCode                                                          int32
}

func (p *Process) exitStatus(ctx context.Context) (ExitStatus, error) {
	if p.sys.pidfd == nil {
		return ExitStatus{}, ErrNoExitStatus
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if st, ok, err := p.readExit(); ok || err != nil {
			return st, err
		}
		select {
		case <-ctx.Done():
			return ExitStatus{}, ErrNoExitStatus // not reaped yet, or a kernel before 6.15
		case <-time.After(delay):
		}
	}
}

// readExit reads the exit status once; ok is false while the process has not been reaped.
func (p *Process) readExit() (st ExitStatus, ok bool, err error) {
	info, err := p.pidfdInfo()
	if err != nil || info.mask&_PIDFD_INFO_EXIT == 0 {
		return st, false, err
	}
	if ws := unix.WaitStatus(info.exitCode); ws.Signaled() {
		st.Signal = ws.Signal()
	} else {
		st.Code = ws.ExitStatus()
	}
	return st, true, nil
}

// pidfdInfo asks for the exit information; a kernel without PIDFD_GET_INFO reports none.
func (p *Process) pidfdInfo() (pidfdInfo, error) {
	info := pidfdInfo{mask: _PIDFD_INFO_EXIT}
	var errno unix.Errno
	if err := p.control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, _PIDFD_GET_INFO, uintptr(unsafe.Pointer(&info)))
	}); err != nil {
		return info, p.errClosed("exit status")
	}
	switch errno {
	case 0:
		return info, nil
	case unix.ENOTTY, unix.EINVAL:
		return info, ErrNoExitStatus
	case unix.ESRCH:
		// The parent is reaping it: the kernel still finds the task but its pid is already
		// detached, and fails the ioctl rather than answer half (pidfd_info's "pid == 0" check).
		// The status is there once the reap completes; reading this as an error made an adopted
		// child's Wait report an unknown exit now and then. A pid outside this namespace fails
		// the same way for good, which the caller's deadline bounds.
		return pidfdInfo{}, nil
	}
	return info, os.NewSyscallError("ioctl PIDFD_GET_INFO", errno)
}
