package custody

import (
	"context"

	"github.com/custody-dev/custody/authority"
)

// awaitExit parks until the leader has exited, on the runtime's poller through the pidfd the
// child's handle holds, so that the cmd.Wait reaping it returns at once. Without it every child
// would hold an OS thread blocked in waitid(2) for its whole life: an owner of 1,000 children
// would run 1,000 threads, and its death, which its supervisor sees only once the kernel has torn
// every one of them down, would take ten times as long. A handle without a pidfd (a kernel
// without pidfd, or a child Go started without one) would be polled instead, which could delay
// the reaping by up to its polling interval: cmd.Wait alone serves it then.
func (c *Child) awaitExit() {
	if c.proc == nil || authority.PidfdError() != nil || c.cmd.Process.WithHandle(func(uintptr) {}) != nil {
		return
	}
	c.proc.Wait(context.Background()) // an error (the handle closed) leaves the wait to cmd.Wait
}
