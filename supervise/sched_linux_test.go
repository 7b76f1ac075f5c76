package supervise_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/supervise"
	"golang.org/x/sys/unix"
)

// The supervisor runs SCHED_BATCH, every thread of it, the runtime's included, so that its
// wake-ups never preempt its owner, but for the one that waits for the owner's death word: that
// wake-up should preempt. The owner's own threads keep their policy.
func TestSupervisorYields(t *testing.T) {
	before := policies(t, os.Getpid())
	c := &supervise.Client{Grace: time.Second, IdleGrace: -1} // kept until Close, while the test looks
	t.Cleanup(func() { c.Close() })
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	testproc.WaitFor(t, 30*time.Second, func() error {
		ps := policies(t, c.PID())
		if len(ps) < 3 {
			return fmt.Errorf("the supervisor has %d thread(s) yet, want the runtime's and the death word's waiter too", len(ps))
		}
		normal := 0
		for tid, p := range ps {
			switch p {
			case unix.SCHED_BATCH:
			case unix.SCHED_NORMAL:
				normal++
			default:
				return fmt.Errorf("the supervisor's thread %d has policy %d, want SCHED_BATCH (%d)", tid, p, unix.SCHED_BATCH)
			}
		}
		if normal != 1 {
			return fmt.Errorf("%d of the supervisor's %d threads are SCHED_NORMAL, want 1 (the death word's waiter)", normal, len(ps))
		}
		return nil
	})
	if waiter := deathWaiter(t, c.PID()); policies(t, c.PID())[waiter] != unix.SCHED_NORMAL {
		t.Errorf("the thread waiting on the death word, %d, is not the SCHED_NORMAL one", waiter)
	}
	for tid, p := range policies(t, os.Getpid()) {
		if was, ok := before[tid]; ok && p != was {
			t.Errorf("this process's thread %d has policy %d after the supervisor's start, %d before", tid, p, was)
		}
		if _, ok := before[tid]; !ok && p == unix.SCHED_BATCH {
			t.Errorf("this process's new thread %d has policy SCHED_BATCH", tid)
		}
	}
}

// An owner that runs SCHED_BATCH itself has a supervisor that is batch throughout: its policy is
// inherited, not custody's doing, and no thread of it is made normal.
func TestSupervisorInheritsBatch(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	was, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if was.Policy != unix.SCHED_NORMAL {
		t.Skipf("this thread runs policy %d, not SCHED_NORMAL", was.Policy)
	}
	batch := *was
	batch.Policy = unix.SCHED_BATCH
	if err := unix.SchedSetAttr(0, &batch, 0); err != nil {
		t.Fatal(err)
	}
	c := &supervise.Client{Grace: time.Second, IdleGrace: -1} // kept until Close, while the test looks
	t.Cleanup(func() { c.Close() })
	err = c.Start()
	if err := unix.SchedSetAttr(0, was, 0); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	waiter := deathWaiter(t, c.PID())
	for tid, p := range policies(t, c.PID()) {
		if p != unix.SCHED_BATCH {
			t.Errorf("the supervisor's thread %d (the death word's waiter is %d) has policy %d, want SCHED_BATCH (%d), inherited", tid, waiter, p, unix.SCHED_BATCH)
		}
	}
}

// deathWaiter waits until a thread of the supervisor pid sleeps on its owner's death word, and
// returns it: the one thread in a shared FUTEX_WAIT (op 0), which the runtime's own waits never
// are (they are private). Its policy is set before that wait begins.
func deathWaiter(t *testing.T, pid int) (tid int) {
	t.Helper()
	testproc.WaitFor(t, 30*time.Second, func() error {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, e.Name()))
			f := strings.Fields(string(b))
			if err == nil && len(f) > 2 && f[0] == strconv.Itoa(unix.SYS_FUTEX) && f[2] == "0x0" {
				tid, _ = strconv.Atoi(e.Name())
				return nil
			}
		}
		return fmt.Errorf("no thread of the supervisor %d waits on the death word yet", pid)
	})
	return tid
}

// policies returns the scheduling policy of each thread of pid.
func policies(t *testing.T, pid int) map[int]uint32 {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	ps := make(map[int]uint32)
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // exited since the listing
		}
		ps[tid] = a.Policy
	}
	return ps
}
