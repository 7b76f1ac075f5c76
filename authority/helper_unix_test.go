//go:build unix

package authority_test

import (
	"os/exec"
	"syscall"
)

// setpgid makes the helper lead a new process group.
func setpgid(cmd *exec.Cmd) { sysProcAttr(cmd).Setpgid = true }

func sysProcAttr(cmd *exec.Cmd) *syscall.SysProcAttr {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	return cmd.SysProcAttr
}
