package localsock

import (
	"os"

	"golang.org/x/sys/unix"
)

// peerCredFD reads LOCAL_PEERCRED (the peer's uid) and LOCAL_PEERPID (its pid), both recorded at
// connect(2) or listen(2).
func peerCredFD(fd int) (Cred, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Cred{}, os.NewSyscallError("getsockopt LOCAL_PEERCRED", err)
	}
	pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	if err != nil {
		return Cred{}, os.NewSyscallError("getsockopt LOCAL_PEERPID", err)
	}
	return Cred{PID: pid, UID: int(x.Uid)}, nil
}
