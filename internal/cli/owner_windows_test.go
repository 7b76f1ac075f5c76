package cli_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() {
	// run-caller starts custody with args (custody run's child the block helper), passing its
	// standard streams on, says "custody <pid>", and waits on stdin: the caller the test kills.
	testproc.Register("run-caller", func(args []string) int {
		c := exec.Command(os.Args[0], args...)
		c.Env = append(os.Environ(), testproc.Env("custody"), nextHelperEnv+"=block")
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("custody", c.Process.Pid)
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
}

// TestRunDiesWithCaller: the caller of custody run is terminated (TerminateProcess: none of its
// code runs); custody run, whose owner it was, stops the child's job, child and grandchild, though
// their lifeline stays open, and exits.
func TestRunDiesWithCaller(t *testing.T) {
	led := ledgerPath(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := testproc.Helper(t, "run-caller", "--ledger", led, "run", "--grace", "1s", "--", exe, "-grandchild")
	cmd.WaitDelay = 10 * time.Second // a survivor would hold the caller's stdout and stderr open
	// A file for custody's stderr: custody outlives the caller, whose Wait would copy until then.
	errs, err := os.Create(testproc.TempDir(t) + `\stderr`)
	if err != nil {
		t.Fatal(err)
	}
	defer errs.Close()
	cmd.Stderr = errs
	p := testproc.Start(t, cmd)
	custodyPID, err := strconv.Atoi(p.Expect("custody ", 30*time.Second)[0])
	if err != nil {
		t.Fatal(err)
	}
	custodyID, err := procid.Read(custodyPID)
	if err != nil {
		t.Fatal(err)
	}
	ids := append(readyIDs(t, p), custodyID.ID)
	rows := psJSON(t, led)
	if len(rows) != 1 || rows[0]["caller_pid"] != float64(p.Process.Pid) {
		t.Fatalf("ps --json: %v; want one row whose caller is %d", rows, p.Process.Pid)
	}
	if err := p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	testproc.WaitFor(t, 20*time.Second, func() error {
		for _, id := range ids {
			err := id.Verify()
			if err == nil {
				return fmt.Errorf("%v still runs after the death of custody run's caller", id)
			}
			if !errors.Is(err, procid.ErrGone) && !errors.Is(err, procid.ErrReused) {
				return err
			}
		}
		return nil
	})
	// custody run wrote the line before it exited; under Wine a process can read as gone to
	// another (its wineserver record ended) a moment before its last writes are all in the file.
	want := fmt.Sprintf("custody: run: owner pid %d ended", p.Process.Pid)
	testproc.WaitFor(t, 5*time.Second, func() error {
		if b, _ := os.ReadFile(errs.Name()); !strings.Contains(string(b), want) {
			return fmt.Errorf("custody run's stderr %q, want %q", b, want)
		}
		return nil
	})
}
