package supervise_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/supervise"
	"golang.org/x/sys/unix"
)

// The supervisor runs SCHED_BATCH, every thread of it, the runtime's included, so that its
// wake-ups never preempt its owner; the owner's own threads keep their policy.
func TestSupervisorYields(t *testing.T) {
	before := policies(t, os.Getpid())
	c := &supervise.Client{Grace: time.Second}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	testproc.WaitFor(t, 30*time.Second, func() error {
		ps := policies(t, c.PID())
		if len(ps) < 2 {
			return fmt.Errorf("the supervisor has %d thread(s) yet, want the runtime's too", len(ps))
		}
		for tid, p := range ps {
			if p != unix.SCHED_BATCH {
				return fmt.Errorf("the supervisor's thread %d has policy %d, want SCHED_BATCH (%d)", tid, p, unix.SCHED_BATCH)
			}
		}
		return nil
	})
	for tid, p := range policies(t, os.Getpid()) {
		if was, ok := before[tid]; ok && p != was {
			t.Errorf("this process's thread %d has policy %d after the supervisor's start, %d before", tid, p, was)
		}
		if _, ok := before[tid]; !ok && p == unix.SCHED_BATCH {
			t.Errorf("this process's new thread %d has policy SCHED_BATCH", tid)
		}
	}
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
