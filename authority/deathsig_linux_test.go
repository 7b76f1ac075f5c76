package authority_test

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills a helper if the test thread that started it dies: a net for a crashed
// test, never a substitute for cleanup (Pdeathsig fires on thread, not process, death).
func setDeathSignal(cmd *exec.Cmd) { sysProcAttr(cmd).Pdeathsig = syscall.SIGKILL }
