//go:build unix

package cli

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

func forwardedSignals() []os.Signal {
	return []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2}
}

// resizeSignals are forwarded too when custody is not the terminal's foreground (see runRun).
func resizeSignals() []os.Signal { return []os.Signal{unix.SIGWINCH} }

func signalled(ee *exec.ExitError) (int, bool) {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}

// terminal is custody's hold on its controlling terminal while a child runs in the foreground.
type terminal struct {
	fd   int
	pgrp int // custody's own process group, to hand the terminal back to
}

// foreground makes cmd's new process group the terminal's foreground group at spawn (in the
// child, before exec: no window in which it could read the terminal from the background and be
// stopped by SIGTTIN), when custody's standard input is a terminal whose foreground group is
// custody's own. Otherwise, as in a pipeline or under a service manager, it changes nothing.
func foreground(cmd *exec.Cmd) *terminal {
	fd := int(os.Stdin.Fd())
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || fg != unix.Getpgrp() {
		return nil
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Foreground = true
	cmd.SysProcAttr.Ctty = 0 // the child's fd 0: its stdin is custody's, the terminal
	return &terminal{fd: fd, pgrp: unix.Getpgrp()}
}

// restore makes custody's group the foreground group again. custody is then in the background, and
// tcsetpgrp(3) from the background raises SIGTTOU, which would stop it: ignore it for the call.
func (t *terminal) restore() {
	if t != nil {
		t.handTo(t.pgrp)
	}
}

// handTo makes pgrp the terminal's foreground group.
func (t *terminal) handTo(pgrp int) {
	signal.Ignore(unix.SIGTTOU)
	defer signal.Reset(unix.SIGTTOU)
	unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, pgrp)
}
