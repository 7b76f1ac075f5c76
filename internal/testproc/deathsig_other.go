//go:build !linux

package testproc

import "os/exec"

// setDeathSignal has no equivalent outside Linux; cleanup kills by handle.
func setDeathSignal(*exec.Cmd) {}
