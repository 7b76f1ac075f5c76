package custody_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

// TestSupervisorKilledTwice: the owner's supervisor is SIGKILLed, and its replacement too as soon
// as it covers the set. The owner reports each loss and each recovery, and its own SIGKILL then
// still takes every child with it.
func TestSupervisorKilledTwice(t *testing.T) {
	kills := 0
	ownerKilled(t, func(sup procid.ID, owner *testproc.Proc) (procid.ID, bool) {
		killIncarnation(t, sup)
		owner.Expect("lost ", 10*time.Second)
		next := incarnation(t, atoi(owner.Expect("covered ", 10*time.Second)[0]))
		if next == sup {
			t.Fatalf("covered again by the supervisor that was killed")
		}
		kills++
		return next, kills < 2
	})
}

// killIncarnation SIGKILLs id through a pidfd, once the pidfd is proven to name it.
func killIncarnation(t *testing.T, id procid.ID) {
	t.Helper()
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		t.Fatalf("pidfd_open %v: %v", id, err)
	}
	defer unix.Close(fd)
	if err := id.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatalf("kill %v: %v", id, err)
	}
}

// TestStartWaitReleases: an owner that starts children and only waits for them, never calling
// Release, is left with no registration, no row and no supervisor descriptor for any of them.
func TestStartWaitReleases(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 100
	}
	sup := &supervise.Client{Grace: time.Second, IdleGrace: -1} // kept, to count its descriptors
	defer sup.Close()
	o := &custody.Owner{Ledger: ledger.Open(ledgerPath(t)), Supervisor: sup}
	custody.WithoutReserved(o)
	ctx := context.Background()
	settled := func() error {
		rows, err := o.Ledger.Rows(ctx)
		if err != nil {
			return err
		}
		if c := sup.Covered(); c != 0 || len(rows) != 0 {
			return fmt.Errorf("%d groups covered, %d rows, after every child exited", c, len(rows))
		}
		return nil
	}
	run := func() {
		c, err := o.Start(ctx, exec.Command("/bin/true"), custody.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 { // the supervisor starts, and its runtime opens what it opens once (netpoll)
		run()
	}
	testproc.WaitFor(t, 10*time.Second, settled)
	before := descriptors(t, sup.PID())
	for range n {
		run()
	}
	testproc.WaitFor(t, 30*time.Second, settled)
	// The supervisor closes a group's descriptor when it reads the group's unregistration.
	testproc.WaitFor(t, 10*time.Second, func() error {
		if after := descriptors(t, sup.PID()); after > before {
			return fmt.Errorf("supervisor holds %d descriptors after %d children, %d before", after, n, before)
		}
		return nil
	})
}

func descriptors(t *testing.T, pid int) int {
	t.Helper()
	if pid == 0 {
		t.Fatal(errors.New("no supervisor runs"))
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}

	return len(fds)
}
