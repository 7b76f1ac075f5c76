//go:build unix && !linux

package supervise

import "os/exec"

// startYielding starts the supervisor. Only Linux has SCHED_BATCH (see sched_linux.go).
func startYielding(cmd *exec.Cmd) error { return cmd.Start() }
