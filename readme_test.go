//go:build !windows

package custody_test

// Not on Windows: its tests run under Wine, which has no Go toolchain to build with.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
)

// goBlocks returns the bodies of the ```go blocks of a Markdown text.
func goBlocks(md []byte) []string {
	var blocks []string
	var cur *strings.Builder
	for line := range strings.Lines(string(md)) {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = new(strings.Builder)
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}

// goTool returns the go command of the toolchain that built this test, else the one on PATH.
func goTool(t *testing.T) string {
	t.Helper()
	if root := runtime.GOROOT(); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		testproc.Skip(t, "no go command to build the README's program with: %v", err)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestReadmeProgram: the README's Go program compiles as written, against this module. It is
// built through an overlay, as a package of the module that exists only for the build, so no
// file is written into the tree.
func TestReadmeProgram(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(md)
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d ```go blocks, want 1 (the program this test builds)", len(blocks))
	}
	if !strings.HasPrefix(blocks[0], "package main\n") {
		t.Fatalf("README.md's Go block does not start with \"package main\": it is to be a whole program")
	}
	root, err := os.Getwd() // the package's directory: the module's root
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "internal", "readmeprogram")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "main.go"): src}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := testproc.Command(t, goTool(t), "build", "-overlay", filepath.Join(dir, "overlay.json"),
		"-o", filepath.Join(dir, "program"), "./internal/readmeprogram")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's Go program does not build: %v\n%s", err, out.String())
	}
}
