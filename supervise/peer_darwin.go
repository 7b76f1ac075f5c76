package supervise

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerPID returns the PID of the process that connected c, from LOCAL_PEERPID, which the kernel
// records at connect(2).
func peerPID(c *net.UnixConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var pid int
	var perr error
	if err := rc.Control(func(fd uintptr) {
		pid, perr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	}); err != nil {
		return 0, err
	}
	return pid, perr
}
