//go:build unix

package procid

import "golang.org/x/sys/unix"

// exists sends signal 0: ESRCH proves no process holds the PID; EPERM means one does, owned by
// someone we may not signal.
func exists(pid int) bool {
	return unix.Kill(pid, 0) != unix.ESRCH
}
