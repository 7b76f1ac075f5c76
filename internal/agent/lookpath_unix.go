//go:build unix

package agent

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/custody-dev/custody"
)

// pgidOf is the child's process group: its own when custody made it lead one, else the one it
// shares (the agent's).
func pgidOf(child *custody.Child, cmd *exec.Cmd) int {
	if cmd == nil || cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		return child.ID.PID
	}
	if pg, err := syscall.Getpgid(child.ID.PID); err == nil {
		return pg
	}
	return 0
}

// lookPath finds argv[0] as the client's language would: a name without '/' in the PATH of the
// child's environment, relative entries from the child's working directory.
func lookPath(name string, env []string, cwd string) (string, *replyError) {
	if strings.Contains(name, "/") {
		p := name
		if cwd != "" && !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return name, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	var denied *replyError
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		full := p
		if cwd != "" && !filepath.IsAbs(p) {
			full = filepath.Join(cwd, p)
		}
		err := executable(full)
		if err == nil {
			return p, nil // a relative path is the kernel's to resolve, from the child's directory
		}
		if err.Code == codePermissionDenied && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", denied
	}
	return "", errorf(codeNotFound, "%s: not found in PATH %q", name, pathEnv)
}

// executable checks that p is a file this process may execute.
func executable(p string) *replyError {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf(codeNotFound, "%s: no such file", p)
	case err != nil:
		return errorf(codePermissionDenied, "%v", err)
	case fi.IsDir():
		return errorf(codePermissionDenied, "%s: is a directory", p)
	}
	if err := syscall.Access(p, 1); err != nil { // X_OK, as execve(2) will judge
		return errorf(codePermissionDenied, "%s: %v", p, err)
	}
	return nil
}
