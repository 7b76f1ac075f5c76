package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/custody-dev/custody"
)

// pgidOf is 0: Windows has no process groups; the scope is the child's job.
func pgidOf(*custody.Child, *exec.Cmd) int { return 0 }

// lookPath finds argv[0] as the client's language would on Windows: a name with a directory as
// it is, else in each directory of the child's Path, each with the extensions of its PATHEXT
// appended unless the name has one of them already.
func lookPath(name string, env []string, cwd string) (string, *replyError) {
	pathEnv, extEnv := "", ".COM;.EXE;.BAT;.CMD"
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "PATH":
			pathEnv = v
		case "PATHEXT":
			extEnv = v
		}
	}
	exts := []string{""}
	if !hasExt(name, extEnv) {
		exts = append(exts, filepath.SplitList(extEnv)...)
	}
	dirs := filepath.SplitList(pathEnv)
	if strings.ContainsAny(name, `/\:`) {
		dirs = []string{""}
	}
	for _, dir := range dirs {
		for _, ext := range exts {
			p := filepath.Join(dir, name+ext)
			full := p
			if cwd != "" && !filepath.IsAbs(p) {
				full = filepath.Join(cwd, p)
			}
			if fi, err := os.Stat(full); err == nil && !fi.IsDir() {
				return full, nil
			}
		}
	}
	return "", errorf(codeNotFound, "%s: not found in Path %q", name, pathEnv)
}

func hasExt(name, pathExt string) bool {
	ext := filepath.Ext(name)
	for _, e := range filepath.SplitList(pathExt) {
		if ext != "" && strings.EqualFold(e, ext) {
			return true
		}
	}
	return false
}
