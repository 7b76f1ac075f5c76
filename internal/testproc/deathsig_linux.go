package testproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills a test child if the test binary's thread that started it dies: a net for a
// crashed test, never a substitute for cleanup (Pdeathsig fires on thread, not process, death).
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
