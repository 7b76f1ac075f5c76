package procfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/custody-dev/custody/internal/procfs"
)

// Append reads a file many times longer than the buffer it is given, after what the buffer held,
// and reports a missing file's error with the buffer as it was.
func TestAppend(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	path := filepath.Join(t.TempDir(), "long")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 16)
	got, err := procfs.Append(path, append(buf, "head:"...))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte("head:"), want...)) {
		t.Fatalf("Append read %d bytes, want the 5 given and the file's %d", len(got), len(want))
	}
	got, err = procfs.Append(filepath.Join(t.TempDir(), "missing"), []byte("kept"))
	if !errors.Is(err, os.ErrNotExist) || string(got) != "kept" {
		t.Fatalf("Append of a missing file: %q, %v; want the buffer kept and ENOENT", got, err)
	}
	// A /proc file the kernel renders as it is read: this process's environment block.
	env, err := procfs.Append("/proc/self/environ", nil)
	if err != nil || len(env) == 0 || env[len(env)-1] != 0 {
		t.Fatalf("Append of /proc/self/environ: %d bytes, %v; want a NUL-ended block", len(env), err)
	}
}

// ReadSmall reads /proc/self/stat whole (it starts with this process's PID) and cuts a file at
// the buffer's length.
func TestReadSmall(t *testing.T) {
	var buf [1024]byte
	n, err := procfs.ReadSmall("/proc/self/stat", buf[:])
	if err != nil {
		t.Fatal(err)
	}
	if pid := strconv.Itoa(os.Getpid()) + " ("; !bytes.HasPrefix(buf[:n], []byte(pid)) || buf[n-1] != '\n' {
		t.Fatalf("ReadSmall of /proc/self/stat: %q; want it whole, starting %q", buf[:n], pid)
	}
	path := filepath.Join(t.TempDir(), "long")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := procfs.ReadSmall(path, buf[:10]); n != 10 || err != nil {
		t.Fatalf("ReadSmall of 100 bytes into 10: %d, %v; want 10", n, err)
	}
}
