package cli

import (
	"golang.org/x/sys/unix"
)

// followStops makes custody follow its child's job control, as a shell expects of its job. When
// the child is stopped (^Z sends SIGTSTP to the foreground group, the child's), custody takes the
// terminal back and stops itself, so the shell sees its job stopped; when the shell continues
// custody (fg), custody gives the terminal to the child's group again, if it is itself in the
// foreground, and continues it (bg leaves the terminal to the shell).
//
// waitid(WSTOPPED) consumes only stop reports, never the exit that the child's reaper waits for,
// and P_PID names only this process's own children: it cannot meet a stranger.
func (t *terminal) followStops(pid, pgid int) {
	if t == nil {
		return
	}
	go func() {
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return // ECHILD: the child has been reaped
			}
			t.restore()
			unix.Kill(unix.Getpid(), unix.SIGSTOP)
			// Continued: take the foreground back for the child only if the shell gave it to us.
			if fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP); err == nil && fg == t.pgrp {
				t.handTo(pgid)
			}
			unix.Kill(-pgid, unix.SIGCONT)
		}
	}()
}
