package cli_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() {
	// grantee writes its PID and the grant in $args[0] to the file args[1], then waits for the
	// file args[2] and exits with the code written in it.
	testproc.Register("grantee", func(args []string) int {
		data := fmt.Sprintf("%d %s", os.Getpid(), os.Getenv(args[0]))
		if err := os.WriteFile(args[1]+".tmp", []byte(data), 0o600); err != nil {
			return 100
		}
		if err := os.Rename(args[1]+".tmp", args[1]); err != nil {
			return 100
		}
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			if b, err := os.ReadFile(args[2]); err == nil {
				code, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				return code
			}
			time.Sleep(20 * time.Millisecond) // polls for the test's word; the minute bounds a leak
		}
		return 101
	})
}

// TestRunGrantAdopt: custody run --grant-env hands its child a grant; custody adopt redeems it;
// the giver exits 0 naming the receiver; ps shows the receiver as owner; the receiver exits with
// the child's code, which Windows tells it through its handle; the used grant is refused.
func TestRunGrantAdopt(t *testing.T) {
	led := ledgerPath(t)
	dir := testproc.TempDir(t)
	granted, exit := filepath.Join(dir, "grant"), filepath.Join(dir, "exit")
	exe, _ := os.Executable()
	giverCmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--grant-env", "HANDOFF", "--",
		exe, "HANDOFF", granted, exit)
	giverCmd.Env = append(giverCmd.Env, nextHelperEnv+"="+testproc.Use("grantee"))
	// A file, not a pipe: the child inherits custody run's stderr and outlives it.
	giverErr, err := os.Create(filepath.Join(dir, "giver-stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer giverErr.Close()
	giverCmd.Stderr = giverErr
	giver := testproc.Start(t, giverCmd)
	var got []string
	testproc.WaitFor(t, 30*time.Second, func() error {
		b, err := os.ReadFile(granted)
		got = strings.Fields(string(b))
		return err
	})
	if len(got) != 2 {
		t.Fatalf("the child's grant file: %q", got)
	}
	pid, _ := strconv.Atoi(got[0])
	inc, err := procid.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	child := inc.ID
	receiver := testproc.Start(t, testproc.Helper(t, "custody", "--ledger", led, "adopt", "--grace", "1s", got[1]))
	if err := giver.Wait(); err != nil {
		t.Fatalf("giver: %v", err)
	}
	want := fmt.Sprintf("handed pid %d to pid %d", child.PID, receiver.Process.Pid)
	if stderr, _ := os.ReadFile(giverErr.Name()); !strings.Contains(string(stderr), want) {
		t.Errorf("giver's stderr %q, want %q", stderr, want)
	}
	if err := child.Verify(); err != nil {
		t.Fatalf("the child after its giver's exit: %v", err)
	}
	rows := psJSON(t, led)
	if len(rows) != 1 || rows[0]["owner"] != float64(receiver.Process.Pid) {
		t.Fatalf("ps --json rows %v, want one owned by the receiver %d", rows, receiver.Process.Pid)
	}
	if err := os.WriteFile(exit, []byte("3"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = receiver.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 3 {
		t.Errorf("adopt after its child exited 3: %v, want exit status 3", err)
	}
	if rows := psJSON(t, led, "--all"); len(rows) != 0 {
		t.Errorf("rows left after the adopter's end: %v", rows)
	}
	before, _ := os.ReadFile(led)
	checkOneLineError(t, "adopt of a used grant", runCLI(t, "--ledger", led, "adopt", got[1]), 1)
	if after, _ := os.ReadFile(led); !bytes.Equal(before, after) {
		t.Errorf("a refused adopt changed the ledger")
	}
}
