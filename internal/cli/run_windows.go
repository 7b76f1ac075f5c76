package cli

import (
	"os"
	"os/exec"
)

// forwardedSignals is empty on Windows: console control events (^C, ^Break) reach every process
// attached to the console, the child included, so there is nothing to forward.
func forwardedSignals() []os.Signal { return nil }

func signalled(*exec.ExitError) (int, bool) { return 0, false }

type terminal struct{}

func foreground(*exec.Cmd) *terminal { return nil }

func (t *terminal) restore() {}
