//go:build unix

package authority_test

import (
	"os/exec"
	"syscall"
)

// setpgid makes the helper lead a new process group.
func setpgid(cmd *exec.Cmd) { sysProcAttr(cmd).Setpgid = true }

// joinGroup puts the helper into the existing group pgid.
func joinGroup(pgid int) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		attr := sysProcAttr(cmd)
		attr.Setpgid, attr.Pgid = true, pgid
	}
}

func sysProcAttr(cmd *exec.Cmd) *syscall.SysProcAttr {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	return cmd.SysProcAttr
}
