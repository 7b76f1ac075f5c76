package localsock

import (
	"os"

	"golang.org/x/sys/unix"
)

// peerCredFD reads SO_PEERCRED: the peer's pid and uid at connect(2) or listen(2).
func peerCredFD(fd int) (Cred, error) {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Cred{}, os.NewSyscallError("getsockopt SO_PEERCRED", err)
	}
	return Cred{PID: int(u.Pid), UID: int(u.Uid)}, nil
}
