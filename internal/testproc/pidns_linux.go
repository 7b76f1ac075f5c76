package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// NewPIDNamespace makes cmd start as PID 1 of a new PID namespace, in a new mount namespace
// (which Go makes private) so that the proc it mounts with [MountProc] stays inside.
func NewPIDNamespace(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
	cmd.SysProcAttr.Unshareflags |= syscall.CLONE_NEWNS
}

// MountProc mounts a proc of the caller's PID namespace on /proc.
func MountProc() error {
	return syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
}

// ReusePID starts processes with start until one receives pid, whose previous holder started at
// clock tick prevStart, and returns it. It first waits for the clock to pass that tick (a PID
// reused within its holder's start tick would be indistinguishable, see package procid), then
// writes pid-1 to ns_last_pid before each start: a thread the Go runtime makes in between takes
// the PID instead, so it retries, stopping each process that missed. The caller runs as root in
// a PID namespace of its own.
func ReusePID(pid int, prevStart uint64, start func() (*exec.Cmd, error)) (*exec.Cmd, error) {
	return ReusePIDWith(pid, prevStart, func() (*exec.Cmd, int, error) {
		c, err := start()
		if err != nil {
			return nil, 0, err
		}
		return c, c.Process.Pid, nil
	}, func(c *exec.Cmd) {
		c.Process.Kill()
		c.Wait()
	})
}

// ReusePIDWith is [ReusePID] for processes a caller keeps in its own type: start starts one and
// returns it with its PID, and discard ends one that missed the PID.
func ReusePIDWith[P any](pid int, prevStart uint64, start func() (P, int, error), discard func(P)) (P, error) {
	var none P
	deadline := time.Now().Add(10 * time.Second)
	for bootTicks() <= prevStart {
		if time.Now().After(deadline) {
			return none, fmt.Errorf("the clock did not pass tick %d", prevStart)
		}
		time.Sleep(time.Millisecond) // polls the clock; synchronises with no process
	}
	return ReusePIDNow(pid, start, discard)
}

// ReusePIDNow is [ReusePIDWith] without the wait for the clock: the process it returns may start
// within the tick the PID's previous holder started in, and then has its start ticks too. A test
// of that case repeats until it happens, and asserts the ticks it relies on.
func ReusePIDNow[P any](pid int, start func() (P, int, error), discard func(P)) (P, error) {
	var none P
	for range 100 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			return none, err
		}
		p, got, err := start()
		if err != nil {
			return none, err
		}
		if got == pid {
			return p, nil
		}
		discard(p)
	}
	return none, fmt.Errorf("no process received pid %d in 100 tries", pid)
}

// bootTicks is CLOCK_BOOTTIME in USER_HZ ticks (100 a second), the unit of a process's start.
func bootTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(err)
	}
	return uint64(ts.Nano()) / 1e7
}

// ReuseWithinTick makes a newcomer take a victim's PID within the clock tick the victim started
// in, so that both have the same start ticks: the case only pidfs ids tell apart. Each try, victim
// starts a process and returns its PID, its start tick and end, which ends and reaps it; end is
// called, and then a process started with start is made to take the PID at once ([ReusePIDNow]).
// When tick (which reads a PID's start tick) shows the newcomer started in another tick, it is
// discarded and the next try starts a new victim. It returns the newcomer and the number of
// tries; the caller asserts the tick equality it relies on itself.
func ReuseWithinTick[P any](tries int, victim func() (pid int, tick uint64, end func(), err error),
	start func() (P, int, error), discard func(P), tick func(pid int) (uint64, error)) (P, int, error) {
	var none P
	for try := 1; try <= tries; try++ {
		pid, want, end, err := victim()
		if err != nil {
			return none, try, err
		}
		end()
		p, err := ReusePIDNow(pid, start, discard)
		if err != nil {
			return none, try, err
		}
		if got, err := tick(pid); err == nil && got == want {
			return p, try, nil
		}
		discard(p)
	}
	return none, tries, fmt.Errorf("no newcomer started within its victim's tick in %d tries", tries)
}
