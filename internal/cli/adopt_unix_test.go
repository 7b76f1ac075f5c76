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
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() {
	// grantee writes the grant in $args[0] and its PID to the file args[1], then lives until the
	// FIFO args[2], its lifeline, reads EOF (the test holds its other end) or a signal ends it.
	testproc.Register("grantee", func(args []string) int {
		data := fmt.Sprintf("%d %s", os.Getpid(), os.Getenv(args[0]))
		if err := os.WriteFile(args[1]+".tmp", []byte(data), 0o600); err != nil {
			return 1
		}
		if err := os.Rename(args[1]+".tmp", args[1]); err != nil {
			return 1
		}
		f, err := os.Open(args[2])
		if err != nil {
			return 1
		}
		io.Copy(io.Discard, f)
		return 0
	})
}

// fifoLifeline makes a FIFO that the test holds open until it ends.
func fifoLifeline(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "life")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0) // a reader and a writer: never blocks
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path
}

// TestRunGrantAdopt: custody run --grant-env hands its child a grant; custody adopt redeems it;
// the giver exits 0 naming the receiver; ps shows the receiver as owner; the receiver forwards a
// signal to the child and exits with its status where the kernel tells a non-parent, else 5.
func TestRunGrantAdopt(t *testing.T) {
	led := ledgerPath(t)
	dir := testproc.TempDir(t)
	life := fifoLifeline(t, dir)
	granted := filepath.Join(dir, "grant")
	exe, _ := os.Executable()
	giverCmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--grace", "1s", "--grant-env", "HANDOFF", "--",
		"env", testproc.Env("grantee"), exe, "HANDOFF", granted, life)
	giverErr := stderrFile(t, giverCmd, dir)
	giver := testproc.Start(t, giverCmd)
	got := awaitFields(t, granted, 2)
	child := incarnationOf(t, got[0])
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
	r := runCLI(t, "--ledger", led, "ps", "--json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("ps --json: %v %q", err, r.stdout)
	}
	if rows[0]["owner"] != float64(receiver.Process.Pid) || rows[0]["spawner_pid"] != float64(receiver.Process.Pid) {
		t.Errorf("ps --json row's owner %v and spawner %v, want the receiver %d", rows[0]["owner"],
			rows[0]["spawner_pid"], receiver.Process.Pid)
	}
	if r := runCLI(t, "--ledger", led, "ps"); !strings.Contains(r.stdout, "OWNER") {
		t.Errorf("ps table has no owner column:\n%s", r.stdout)
	}
	receiver.Process.Signal(syscall.SIGTERM)
	// The giver is gone, so init reaps the child, when it gets to it: the kernel tells its status
	// to a non-parent only after that reap, which adopt awaits for a second (see adopt's help).
	code := exitCodeOf(receiver.Wait())
	if code != 5 && (!exitInfo() || code != 128+int(syscall.SIGTERM)) {
		t.Errorf("adopt after its child's death by a forwarded SIGTERM: exit %d, want 143 or 5", code)
	}
	testproc.WaitFor(t, 10*time.Second, func() error {
		if err := child.Verify(); err == nil {
			return fmt.Errorf("the child %v lives on after its adopter's end", child)
		}
		return nil
	})
	if r := runCLI(t, "--ledger", led, "ps", "--all", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("rows left after the adopter's end: %s", r.stdout)
	}
	// The grant is spent: a second redemption is refused, with nothing changed.
	before, _ := os.ReadFile(led)
	checkOneLineError(t, "adopt of a used grant", runCLI(t, "--ledger", led, "adopt", got[1]), 1)
	if after, _ := os.ReadFile(led); !bytes.Equal(before, after) {
		t.Errorf("a refused adopt changed the ledger")
	}
}

// TestAdoptBadInput: a malformed grant and bad arguments get one line and change nothing.
func TestAdoptBadInput(t *testing.T) {
	led := ledgerPath(t)
	for _, tc := range []struct {
		desc string
		args []string
		code int
	}{
		{"garbage", []string{"adopt", "not-a-grant"}, 1},
		{"truncated", []string{"adopt", "custody-grant-v1:eyJzb2Nr"}, 1},
		{"no grant", []string{"adopt"}, 2},
		{"two grants", []string{"adopt", "a", "b"}, 2},
		{"zero grace", []string{"adopt", "--grace", "0s", "x"}, 2},
		{"bad grant variable", []string{"run", "--grant-env", "A=B", "--", "true"}, 2},
	} {
		checkOneLineError(t, tc.desc, runCLI(t, append([]string{"--ledger", led}, tc.args...)...), tc.code)
	}
	if _, err := os.Stat(led); !os.IsNotExist(err) {
		t.Errorf("bad input created the ledger: %v", err)
	}
}

// stderrFile sends cmd's stderr to a file in dir, and returns the file. A file, not a buffer: a
// child inherits custody run's stderr and outlives it, so a pipe would keep Wait copying until the
// child's end.
func stderrFile(t *testing.T, cmd *exec.Cmd, dir string) *os.File {
	t.Helper()
	f, err := os.CreateTemp(dir, "stderr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cmd.Stderr = f
	return f
}

// awaitFields waits for a helper to write the file path (by rename, whole) and returns its
// space-separated fields, at most n (the last holds the rest).
func awaitFields(t *testing.T, path string, n int) []string {
	t.Helper()
	var b []byte
	testproc.WaitFor(t, 30*time.Second, func() error {
		var err error
		b, err = os.ReadFile(path)
		return err
	})
	f := strings.SplitN(strings.TrimRight(string(b), "\n"), " ", n)
	if len(f) != n {
		t.Fatalf("%s: %q, want %d fields", path, b, n)
	}
	return f
}

// exitInfo reports whether the kernel tells a pidfd's holder how its process ended (Linux 6.15+).
func exitInfo() bool { return kernelAtLeast(6, 15) }

func kernelAtLeast(wantMajor, wantMinor int) bool {
	var u unix.Utsname
	if runtime.GOOS != "linux" || unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major > wantMajor || major == wantMajor && minor >= wantMinor
}

func incarnationOf(t *testing.T, pid string) procid.ID {
	t.Helper()
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := procid.Read(n)
	if err != nil {
		t.Fatal(err)
	}
	return inc.ID
}
