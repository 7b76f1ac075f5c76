package supervise

import (
	"os"
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
// busy, a batch thread woken by the owner's death would wait for the running thread's time slice
// to end (milliseconds) instead of preempting it: the one thread that waits for that death is
// made SCHED_NORMAL again (normalForDeath), and the supervisor is told so by $EnvBatch.
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
	cmd.Env = append(cmd.Env, EnvBatch+"=1")
	err = cmd.Start()
	if unix.SchedSetAttr(0, was, 0) != nil {
		// Back to its own policy and nice value cannot be refused; were it, the thread stays
		// with this goroutine (locked once more than unlocked) rather than run others as batch.
		runtime.LockOSThread()
	}
	return err
}

// normalForDeath makes the calling goroutine's thread, locked to it, SCHED_NORMAL again in a
// supervisor that startYielding made batch ($EnvBatch), for the wait on the owner's death word;
// done ends that, told whether the owner died. The death is the one wake-up that should preempt:
// the owner's threads are exiting on every processor, a woken batch thread waited behind them
// (the death was seen 200–400 µs after the owner's SIGKILL, at twenty scopes, against 110–140
// µs), and every signal of the sweep waited with it. At a death the thread is unlocked and
// stays normal: the goroutine that sweeps, readied by the waiter, runs next on it, and the
// supervisor ends with the sweep. When the word comes to name no thread instead (no death, the
// pipe's end will say), the thread goes back to batch before it can run anything else, and if
// that is refused it ends with the goroutine (still locked).
func normalForDeath() (done func(died bool)) {
	nothing := func(bool) {}
	if os.Getenv(EnvBatch) != "1" {
		return nothing
	}
	runtime.LockOSThread()
	was, err := unix.SchedGetAttr(0, 0)
	if err != nil || was.Policy != unix.SCHED_BATCH {
		runtime.UnlockOSThread()
		return nothing
	}
	normal := *was
	normal.Policy = unix.SCHED_NORMAL
	if unix.SchedSetAttr(0, &normal, 0) != nil {
		runtime.UnlockOSThread()
		return nothing
	}
	return func(died bool) {
		if died || unix.SchedSetAttr(0, was, 0) == nil {
			runtime.UnlockOSThread()
		}
	}
}
