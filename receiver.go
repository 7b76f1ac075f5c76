package custody

import (
	"fmt"

	"github.com/custody-dev/custody/procid"
)

// maxDepth bounds the walk up a receiver's ancestry: a PPID loop, which a racing exit and PID
// reuse can make of the readings, ends it too.
const maxDepth = 4096

// enclosed returns why the process pid may not receive c, or "" when it may: it is c itself,
// descends from c, or runs inside c's scope (a descendant that left the ancestry by a double
// fork is still there, in the cgroup or the job). Such a receiver would cover a scope that holds
// itself and its own supervisor: once the giver let go, nothing outside the tree would kill it,
// and the tree would outlive the program that asked for it (invariant 3). A receiver that cannot
// be placed is refused too: nothing proves it outside.
func (c *Child) enclosed(pid int) string {
	if pid == c.ID.PID {
		return fmt.Sprintf("the receiver is pid %d itself, the child it would take", pid)
	}
	p := pid
	for range maxDepth {
		inc, err := procid.Read(p)
		if err != nil || inc.PPID <= 1 {
			break
		}
		if inc.PPID == c.ID.PID {
			return fmt.Sprintf("the receiver pid %d descends from pid %d, the child it would take", pid, c.ID.PID)
		}
		p = inc.PPID
	}
	in, err := c.scope.Holds(pid)
	switch {
	case err != nil:
		return fmt.Sprintf("cannot tell whether the receiver pid %d runs inside the child's %v: %v", pid, c.scope, err)
	case in:
		return fmt.Sprintf("the receiver pid %d runs inside the child's %v, which it would then cover itself", pid, c.scope)
	}
	return ""
}
