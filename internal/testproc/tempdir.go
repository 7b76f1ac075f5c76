package testproc

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TempDir is t.TempDir, except under Windows, where Go 1.26's RemoveAll fails under Wine 8
// ("unlinkat: Invalid function") and fails the test at cleanup: there it makes the directory
// itself and removes it file by file, logging what it cannot remove.
func TempDir(t testing.TB) string {
	t.Helper()
	if runtime.GOOS != "windows" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("", "custody-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(t, dir) })
	return dir
}

func removeTree(t testing.TB, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			removeTree(t, p)
			continue
		}
		if err := os.Remove(p); err != nil {
			t.Logf("cleanup: %v", err)
		}
	}
	if err := os.Remove(dir); err != nil {
		t.Logf("cleanup: %v", err)
	}
}
