//go:build unix

package custody

// The gate closes the process-group path's window: without a cgroup the child's scope is
// covered only after its start (the supervisor is told its group once it exists), so an owner
// killed between the fork and that registration would orphan a child that already runs. With
// the gate the child is started as a copy of the owner's own binary, which is a gate from the
// initialisation of custody's packages on: it waits until the owner has covered its group, and
// only then execs the real program in the same process (same PID, same group, same start). An
// owner that dies first closes the gate's pipe: the gate exits and the program never runs. This
// is runc's exec.fifo pattern.
//
// The child's side is internal/gatechild, whose package initialisation waits at the gate before
// the binary's other packages are initialised, let alone its main run. An owner gates its
// children when it called custody.Init, as every owner with the built-in supervisor must; one
// that did not starts them ungated, with the window.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/custody-dev/custody/internal/eintr"
	"github.com/custody-dev/custody/internal/gatechild"
	"github.com/custody-dev/custody/internal/selfexe"
	"golang.org/x/sys/unix"
)

// initCalled reports whether this process called Init: its binary is then known to gate.
var initCalled atomic.Bool

// noGate, set by benchmarks only (export_test.go), starts children ungated, to measure the gate.
var noGate bool

// gate holds the owner's end of one child's gate. Its ends are plain descriptors, never
// registered with the runtime's poller, which os.Pipe would do: each end made non-blocking and
// added to epoll, the child's end made blocking again for the fork and taken out at its close,
// six system calls on the start's path for a pipe the owner never waits on (it writes one byte
// to a pipe with room, and closes).
type gate struct {
	r *os.File // the child's end, until the child has its own (os/exec passes files)
	w int      // the owner's end, or -1 once closed
}

// newGate makes cmd start as a gate, when this binary can be one. Call it after every other
// change to cmd; nil means the child is started ungated.
func newGate(cmd *exec.Cmd) (*gate, error) {
	if !initCalled.Load() || cmd.Err != nil || noGate {
		return nil, nil
	}
	if err := execable(cmd); err != nil {
		return nil, err
	}
	// The running binary, even after an upgrade in place: by path, the child would run the new
	// file's main, which may be no gate, and then that program instead of the one asked for.
	exe, err := selfexe.Path()
	if err != nil {
		return nil, nil
	}
	rfd, w, err := gatePipe()
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(rfd, &st); err != nil {
		unix.Close(rfd)
		unix.Close(w)
		return nil, fmt.Errorf("gate: %w", os.NewSyscallError("fstat", err))
	}
	r := os.NewFile(uintptr(rfd), "|0") // blocking: the runtime leaves it to the fork as it is
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	fd := 2 + len(cmd.ExtraFiles)
	cmd.Env = append(cmd.Env, gatechild.EnvFD+"="+strconv.Itoa(fd), gatechild.EnvPipe+"="+gatechild.PipeID(uint64(st.Dev), uint64(st.Ino)),
		gatechild.EnvPath+"="+cmd.Path)
	cmd.Path = exe
	return &gate{r: r, w: w}, nil
}

// execable fails as cmd.Start would if the program cannot be executed: missing, a directory, or
// not executable by this process (the same checks as exec.LookPath). A gated child execs its
// program only after Start has returned, so without this check such a start would succeed, and
// the child would exit at once with 127 or 126 (the gate's exec error goes to its stderr).
// Faults only an exec(2) finds (a bad binary format, a script's missing interpreter) still end
// the child that way.
func execable(cmd *exec.Cmd) error {
	path := cmd.Path
	if !filepath.IsAbs(path) {
		path = filepath.Join(cmd.Dir, path) // what the child's exec resolves it against
	}
	var st unix.Stat_t
	err := unix.Stat(path, &st)
	switch {
	case err != nil:
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		err = unix.EACCES // as execve(2) answers for a directory
	default:
		err = unix.Faccessat(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS)
	}
	if err != nil {
		return &os.PathError{Op: "fork/exec", Path: cmd.Path, Err: err}
	}
	return nil
}

// started closes the owner's copy of the child's end, once the child has its own.
func (g *gate) started() {
	if g != nil {
		g.r.Close()
	}
}

// open lets the child exec its program; close without open makes it exit without running it.
func (g *gate) open() error {
	if g == nil {
		return nil
	}
	_, err := eintr.Retry(func() (int, error) { return unix.Write(g.w, []byte{1}) })
	if err != nil {
		err = os.NewSyscallError("write", err)
	}
	return errors.Join(err, g.closeW())
}

func (g *gate) close() {
	if g != nil {
		g.r.Close()
		g.closeW()
	}
}

// closeW closes the owner's end once: a descriptor closed twice could be another file's by then.
func (g *gate) closeW() error {
	if g.w < 0 {
		return nil
	}
	err := unix.Close(g.w)
	g.w = -1
	if err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}
