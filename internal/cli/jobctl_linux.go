package cli

import (
	"github.com/custody-dev/custody/internal/eintr"
	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody"
)

// followStops makes custody follow its child's job control, as a shell expects of its job. When
// the child is stopped (^Z sends SIGTSTP to the foreground group, the child's), custody takes the
// terminal back and stops itself, so the shell sees its job stopped; when the shell continues
// custody (fg), custody gives the terminal to the child's group again, if it is itself in the
// foreground, and continues it (bg leaves the terminal to the shell).
//
// waitid(WSTOPPED) consumes only stop reports, never the exit that the child's reaper waits for,
// and P_PID names only this process's own children: it cannot meet a stranger. SIGCONT goes to
// the child's group as its scope proves it (through the leader's pidfd where the kernel can), as
// every other signal custody sends.
func (t *terminal) followStops(child *custody.Child) {
	if t == nil {
		return
	}
	pid, pgid := child.ID.PID, child.ID.PID // the child leads its group
	go func() {
		for {
			var info unix.Siginfo
			err := eintr.Ignoring(func() error { return unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED, nil) })
			if err != nil {
				return // ECHILD: the child has been reaped
			}
			t.restore()
			stopSelf()
			// Continued: take the foreground back for the child only if the shell gave it to us.
			if fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP); err == nil && fg == t.pgrp {
				t.handTo(pgid)
			}
			child.SignalGroup(unix.SIGCONT)
		}
	}()
}

// stopSelf stops custody and returns only once it has been continued. kill(getpid(), SIGSTOP) is
// not enough: a process-directed signal is taken by whichever thread the kernel picks, and the
// calling thread runs on until that thread starts the group stop. In that window followStops saw
// the terminal still custody's, gave it back to the child and continued it, all before custody
// stopped; the shell then took the terminal, the child read from the background, and SIGTTIN
// stopped it again right after fg. Sent to the calling thread, SIGSTOP (which cannot be blocked)
// is taken on the way out of the tgkill(2) itself: the thread stops there and returns only after
// SIGCONT, and the goroutine cannot change threads while it is in the system call.
func stopSelf() {
	unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.SIGSTOP)
}
