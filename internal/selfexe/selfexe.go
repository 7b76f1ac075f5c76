// Package selfexe names the running binary for a process that re-executes it: the owner's
// supervisor and the process-group path's gate are copies of the owner's own binary.
package selfexe

import (
	"os"
	"runtime"
	"sync"
)

// procExe reports whether /proc/self/exe can be followed: Linux with /proc mounted.
var procExe = sync.OnceValue(func() bool {
	if runtime.GOOS != "linux" {
		return false
	}
	_, err := os.Stat("/proc/self/exe")
	return err == nil
})

// Path returns what execs the running binary. On Linux it is /proc/self/exe, which in a forked
// child is the parent's own running binary whatever became of its file. The hazard it removes:
// by path, a binary upgraded in place while it runs (a package upgrade renames a new file over
// it, a rebuild) would be the new file, whose main may be neither a supervisor nor a gate (a
// version without custody, or one speaking another protocol). Elsewhere, and where /proc is not
// mounted, it is the binary's path; a file gone from it fails the exec, as it would have.
func Path() (string, error) {
	if procExe() {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// Name returns the running binary's path for a copy's argv[0], which ps shows: the file it was
// started from, or path (what [Path] returned) where that cannot be read.
func Name(path string) string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return path
}
