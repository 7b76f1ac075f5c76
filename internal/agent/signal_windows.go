package agent

import "syscall"

// signalByName returns the signal named name, or 0: on Windows a scope takes SIGTERM (the request
// to exit: WM_CLOSE, CTRL_BREAK) and SIGKILL (the job ended) alone, and refuses the others.
func signalByName(name string) syscall.Signal {
	switch name {
	case "SIGTERM":
		return syscall.SIGTERM
	case "SIGKILL":
		return syscall.SIGKILL
	}
	return 0
}
