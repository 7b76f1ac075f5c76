package cli

import (
	"os"
	"os/exec"
)

// Console control events on Windows. Typed ^C and ^Break reach every process attached to the
// console, in every process group, except those that ignore Ctrl+C: a child that scope.Prepare
// starts in a new process group (its default) ignores it, and so would every descendant. custody
// run's child is the user's foreground program, so run keeps it in custody's group with Ctrl+C
// enabled (scope.PrepareSharedConsole): ^C then reaches it directly, as a Unix terminal's reaches the
// foreground group. custody itself takes ^C and ^Break as os.Interrupt (Main's NotifyContext) and
// ignores them while it waits, so the child alone decides what they mean; when it exits, custody
// stops what is left of its job. Nothing needs forwarding: forwardedSignals is empty.

// forwardedSignals is empty on Windows: console control events reach the child directly.
func forwardedSignals() []os.Signal { return nil }

// resizeSignals is empty: a Windows console tells every attached process of a resize itself.
func resizeSignals() []os.Signal { return nil }

func signalled(*exec.ExitError) (int, bool) { return 0, false }

type terminal struct{}

// foreground changes no console state: run starts its child with StartOptions.SharedConsole,
// which keeps it in custody's console process group, taking Ctrl+C (see above).
func foreground(*exec.Cmd) *terminal { return nil }

func (t *terminal) restore() {}
