package custody

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// gateBinary returns what the gated child execs first: /proc/self/exe, which in the forked child
// is the owner's own running binary whatever became of its path, where /proc is mounted.
//
// The hazard it removes: by path, a binary upgraded in place while the owner runs (a package
// upgrade, a rebuild) would be the new file, and the child would run the new program's main as
// its gate, which may not be one (a version without custody, or one whose gate reads other
// variables): the child would then run that program instead of the one asked for. Through
// /proc/self/exe the gate is always the binary that called Init. It also spares each start the
// readlink that os.Executable makes.
func gateBinary() (string, error) { return procSelfExe() }

// procSelfExe is "/proc/self/exe" where the link can be followed, else os.Executable.
var procSelfExe = sync.OnceValues(func() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
})

// gatePipe makes the gate's pipe, both ends close-on-exec from their first instant: a fork on
// another thread meanwhile must not take a copy that would hold the gate open past the owner's
// death.
func gatePipe() (r, w int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, os.NewSyscallError("pipe2", err)
	}
	return p[0], p[1], nil
}
