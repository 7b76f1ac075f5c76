package supervise

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startYielding starts the supervisor as SCHED_BATCH, the policy it then has from its first
// instruction, every thread of it included: the fork copies the forking thread's policy, and
// this thread has it only for the fork. A batch thread has a normal thread's share of the CPU
// (its weight is its nice value's) but never preempts the thread running where it wakes.
//
// The hazard it removes: a supervisor woken by a cover line lands on the owner's own processor
// when the other ones are busy (on the process-group path the gated child's exec runs there),
// preempts the owner for the 20–30 µs it takes to prove the group, and the owner's start waits
// for it. Nothing of custody's promises waits on that line being read at once: a line in the
// pipe is read before the owner's death is acted on. What it costs: when every processor is
// busy, the supervisor's reaction to the owner's death waits for the running thread's time
// slice to end (milliseconds) instead of preempting it; the kill that follows is as complete.
//
// A thread with another policy (real-time, idle, batch already) is left as it is, and the
// supervisor inherits that policy, as any child does. The nice value is kept either way.
func startYielding(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	was, err := unix.SchedGetAttr(0, 0)
	if err != nil || was.Policy != unix.SCHED_NORMAL {
		return cmd.Start()
	}
	batch := *was
	batch.Policy = unix.SCHED_BATCH
	if unix.SchedSetAttr(0, &batch, 0) != nil {
		return cmd.Start()
	}
	err = cmd.Start()
	if unix.SchedSetAttr(0, was, 0) != nil {
		// Back to its own policy and nice value cannot be refused; were it, the thread stays
		// with this goroutine (locked once more than unlocked) rather than run others as batch.
		runtime.LockOSThread()
	}
	return err
}
