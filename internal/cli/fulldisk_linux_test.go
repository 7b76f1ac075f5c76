package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
)

// TestStopFullDisk: on a full disk, stop signals, sees the exit, and cannot drop the row: it
// reports the outcome and exits 4, never 1, which says that nothing was signalled.
func TestStopFullDisk(t *testing.T) {
	testproc.RequireRoot(t) // mount a small tmpfs
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		testproc.Skip(t, "skipping: cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	led := filepath.Join(dir, "spawn-ledger.json")
	p := reaped(t, exec.Command("cat"))
	pid := strconv.Itoa(p.Process.Pid)
	if r := runCLI(t, "--ledger", led, "register", "--pid", pid); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	fill(t, filepath.Join(dir, "filler"))
	out, r := stopJSON(t, led, pid)
	if len(out) != 1 || out[0].Outcome != "exited" {
		t.Errorf("outcomes %+v; want exited", out)
	}
	if r.code != 4 || !strings.Contains(r.stderr, "no space left") {
		t.Errorf("exit %d, stderr %q; want 4 and the write's error", r.code, r.stderr)
	}
	if alive(t, p.Process.Pid) {
		t.Errorf("the process lives")
	}
}

// fill writes to path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
