//go:build !linux

package authority_test

import "os/exec"

// setDeathSignal has no equivalent outside Linux; cleanup kills by handle.
func setDeathSignal(*exec.Cmd) {}
