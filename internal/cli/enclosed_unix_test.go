//go:build linux || darwin

package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
)

func init() {
	// inner-adopter is a granted child that runs, as its own child, custody adopt of its own
	// grant ($args[1]) in ledger args[0], writes "<exit code> <grant> <stderr>" to the file
	// args[2], and lives until the FIFO args[3], its lifeline, reads EOF.
	testproc.Register("inner-adopter", func(args []string) int {
		grant := os.Getenv(args[1])
		cmd := exec.Command(os.Args[0], "--ledger", args[0], "adopt", "--grace", "1s", grant)
		cmd.Env = append(os.Environ(), testproc.Env("custody"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		code := 0
		if err := cmd.Run(); err != nil {
			code = exitCodeOf(err)
		}
		data := fmt.Sprintf("%d %s %s", code, grant, stderr.String())
		if os.WriteFile(args[2]+".tmp", []byte(data), 0o600) != nil || os.Rename(args[2]+".tmp", args[2]) != nil {
			return 1
		}
		f, err := os.Open(args[3])
		if err != nil {
			return 1
		}
		io.Copy(io.Discard, f)
		return 0
	})
}

// TestAdoptFromInsideRefused: a descendant of a granted child, inside its scope, cannot adopt
// its own ancestor (it would cover the scope that holds itself, and nothing outside would any
// more): the giver refuses it, saying why in one line, and keeps the child; the grant stays
// served, and a receiver outside then takes the child.
func TestAdoptFromInsideRefused(t *testing.T) {
	led := ledgerPath(t)
	dir := testproc.TempDir(t)
	out := filepath.Join(dir, "inner")
	exe, _ := os.Executable()
	giverCmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--grace", "1s", "--grant-env",
		"HANDOFF", "--", "env", testproc.Env("inner-adopter"), exe, led, "HANDOFF", out, fifoLifeline(t, dir))
	stderrFile(t, giverCmd, dir)
	giver := testproc.Start(t, giverCmd)
	f := awaitFields(t, out, 3)
	code, grant, stderr := f[0], f[1], f[2]
	if code != "1" || !strings.Contains(stderr, "descends from") || strings.Contains(stderr, "\n") {
		t.Errorf("adopt by the granted child's own child: exit %s, stderr %q; want 1 and one line saying it descends from the child", code, stderr)
	}
	rows := psRows(t, led)
	if len(rows) != 1 || rows[0]["owner"] != float64(giver.Process.Pid) {
		t.Fatalf("after the refused adopt, rows %v, want the child's row owned by the giver %d", rows, giver.Process.Pid)
	}
	if err := giver.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the giver after a refused adopt: %v", err)
	}
	// The refusal did not spend the grant: a receiver outside the child's scope takes it.
	// It has the grant in its environment too, as a receiver handed one there would: its
	// supervisor must not.
	receiverCmd := testproc.Helper(t, "custody", "--ledger", led, "adopt", "--grace", "1s", grant)
	receiverCmd.Env = append(receiverCmd.Env, "HANDOFF="+grant)
	receiver := testproc.Start(t, receiverCmd)
	if err := giver.Wait(); err != nil {
		t.Fatalf("the giver after a receiver outside adopted: %v", err)
	}
	rows = psRows(t, led)
	if len(rows) != 1 || rows[0]["owner"] != float64(receiver.Process.Pid) {
		t.Errorf("after the adopt from outside, rows %v, want the receiver %d as owner", rows, receiver.Process.Pid)
	}
	if runtime.GOOS == "linux" {
		for _, pid := range childrenOf(t, receiver.Process.Pid) {
			if env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); bytes.Contains(env, []byte(grant)) {
				t.Errorf("the adopter's child %d (its supervisor) has the grant in its environment", pid)
			}
		}
	}
	receiver.Process.Signal(syscall.SIGTERM)
	receiver.Wait()
}

func psRows(t *testing.T, led string) []map[string]any {
	t.Helper()
	r := runCLI(t, "--ledger", led, "ps", "--all", "--json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("ps --json: %v %q", err, r.stdout)
	}
	return rows
}

// childrenOf lists pid's children (Linux).
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(w)
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		t.Fatalf("pid %d has no children", pid)
	}
	return out
}
