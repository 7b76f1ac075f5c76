//go:build linux || darwin

package custody_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/scope"
)

// TestStartUnexecutable: a program that cannot be executed fails Start, with the error and the
// one line cmd.Start gives, on every containment, and leaves the ledger as it was. On the
// process-group path the child execs its program only after Start has returned (it waits at the
// gate until covered): without a check before the start, Start succeeded and the child exited
// with 127. A relative path is the child's, resolved against cmd.Dir.
func TestStartUnexecutable(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range containments() {
		t.Run("containment="+c, func(t *testing.T) {
			t.Setenv(scope.EnvContainment, c)
			o := newOwner(t)
			for _, tc := range []struct {
				name      string
				path, dir string
				want      error
			}{
				{"missing", filepath.Join(dir, "missing"), "", fs.ErrNotExist},
				{"directory", dir, "", fs.ErrPermission},
				{"not executable", plain, "", fs.ErrPermission},
				{"relative, missing in Dir", "prog", t.TempDir(), fs.ErrNotExist},
			} {
				before, _ := os.ReadFile(o.Ledger.Path())
				cmd := &exec.Cmd{Path: tc.path, Args: []string{tc.path}, Dir: tc.dir}
				child, err := o.Start(context.Background(), cmd, custody.StartOptions{})
				if err == nil {
					child.Wait()
					t.Errorf("%s: the start succeeded", tc.name)
					continue
				}
				if !errors.Is(err, tc.want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%s: %q, want one line wrapping %v", tc.name, err, tc.want)
				}
				if after, _ := os.ReadFile(o.Ledger.Path()); !bytes.Equal(before, after) {
					t.Errorf("%s changed the ledger:\n%s\n%s", tc.name, before, after)
				}
			}
			child, err := o.Start(context.Background(), &exec.Cmd{Path: "prog", Args: []string{"prog"}, Dir: dir}, custody.StartOptions{})
			if err != nil {
				t.Fatalf("a relative path, executable in Dir: %v", err)
			}
			if err := child.Wait(); err != nil {
				t.Errorf("a relative path, executable in Dir: %v", err)
			}
		})
	}
}
