package supervise

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the PID (LOCAL_PEERPID) and effective uid (LOCAL_PEERCRED) of the process
// that connected c, both recorded by the kernel at connect(2).
func peerCred(c *net.UnixConn) (pid, uid int, err error) {
	pid, err = peerPID(c)
	if err != nil {
		return 0, 0, err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Xucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, cerr
	}
	return pid, int(cred.Uid), nil
}
