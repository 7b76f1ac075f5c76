package custody

import (
	"os"

	"golang.org/x/sys/unix"
)

// peerCredFD reads SO_PEERCRED: the peer's pid and uid at connect(2) or listen(2).
func peerCredFD(fd int) (cred, error) {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return cred{}, os.NewSyscallError("getsockopt SO_PEERCRED", err)
	}
	return cred{pid: int(u.Pid), uid: int(u.Uid)}, nil
}
