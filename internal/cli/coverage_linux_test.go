package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

// TestRunSupervisorKilledTwice: custody run's supervisor is SIGKILLed, and its replacement as soon
// as it covers the child. custody run says so on stderr each time, and each time that the child
// is covered again; its own SIGKILL then still takes the child's whole group with it.
func TestRunSupervisorKilledTwice(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	cmd := testproc.Helper(t, "custody", "--ledger", ledgerPath(t), "run", "--grace", "1s", "--",
		"sh", "-c", "sleep 1000 & echo pids $$ $!; wait")
	cmd.Env = append(cmd.Env, mark)
	errs := &screen{}
	cmd.Stderr = errs
	p := testproc.Start(t, cmd)
	var scope []procid.ID
	for _, s := range p.Expect("pids ", 10*time.Second) {
		scope = append(scope, readID(t, atoi(s)))
	}
	for kill := 1; kill <= 2; kill++ {
		var sup procid.ID
		testproc.WaitFor(t, 10*time.Second, func() (err error) {
			sup, err = supervisorOf(p.Process.Pid)
			return err
		})
		if err := killID(sup); err != nil {
			t.Fatal(err)
		}
		errs.waitForCount(t, "custody: warning: run: supervise: supervisor pid "+strconv.Itoa(sup.PID)+" lost", 1)
		errs.waitForCount(t, "custody: run: a new supervisor covers the child again", kill)
	}
	p.Process.Signal(syscall.SIGKILL)
	p.Wait()
	testproc.WaitFor(t, 5*time.Second, func() error { // grace 1s; a loaded machine takes longer
		for _, id := range scope {
			if id.Verify() == nil {
				return fmt.Errorf("%v of the scope still runs", id)
			}
		}
		return nil
	})
}

// supervisorOf finds the supervisor among the children of pid: the copy of the binary started
// with $CUSTODY_SUPERVISOR set.
func supervisorOf(pid int) (procid.ID, error) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(b)) {
			env, _ := os.ReadFile("/proc/" + f + "/environ")
			if bytes.Contains(env, []byte(supervise.EnvSupervisor+"=1\x00")) {
				inc, err := procid.Read(atoi(f))
				return inc.ID, err
			}
		}
	}
	return procid.ID{}, fmt.Errorf("pid %d has no supervisor child", pid)
}

func readID(t *testing.T, pid int) procid.ID {
	t.Helper()
	inc, err := procid.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return inc.ID
}

// killID SIGKILLs id through a pidfd, once the pidfd is proven to name it.
func killID(id procid.ID) error {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %v: %w", id, err)
	}
	defer unix.Close(fd)
	if err := id.Verify(); err != nil {
		return err
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}

// TestRunKilled: SIGKILL of custody run kills the whole scope within the grace. Whatever the
// outcome, nothing the test started outlives it: its processes carry a mark, and the survivors of
// a failure are killed at its end.
func TestRunKilled(t *testing.T) {
	mark := testproc.Mark()
	testproc.CleanupMarked(t, mark)
	cmd := testproc.Helper(t, "custody", "--ledger", ledgerPath(t), "run", "--grace", "1s", "--",
		"sh", "-c", "sleep 1000 & echo pids $$ $!; wait")
	cmd.Env = append(cmd.Env, mark)
	p := testproc.Start(t, cmd)
	var scope []procid.ID
	for _, s := range p.Expect("pids ", 10*time.Second) {
		scope = append(scope, readID(t, atoi(s)))
	}
	p.Process.Signal(syscall.SIGKILL)
	p.Wait()
	testproc.WaitFor(t, 5*time.Second, func() error { // grace 1s; a loaded machine takes longer
		for _, id := range scope {
			if id.Verify() == nil {
				return fmt.Errorf("%v of the scope still runs", id)
			}
		}
		return nil
	})
}
