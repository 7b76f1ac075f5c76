// Package caller holds a proven handle on the process custody serves as its owner: by default the
// program that called `custody run` or `custody adopt`, or any process named by its PID. The
// handle is taken first and the identity proven through it second, so the process watched is the
// one meant, and [Process.Done] tells of its end however it ends (exit, crash, SIGKILL, OOM).
//
//	OS       handle                                   proof after the handle is held
//	Linux    pidfd (pidfd_open(2), 5.3+); readable    getppid(2) unchanged (Parent); the start read
//	         once the process has exited              after the open is not later than custody's
//	macOS    kqueue EVFILT_PROC NOTE_EXIT on the PID  as Linux; no exit event pending after the read
//	Windows  OpenProcess(SYNCHRONIZE|                 creation time not later than custody's own
//	         PROCESS_QUERY_LIMITED_INFORMATION)
//	others   none: errors.ErrUnsupported
//
// A caller that dies before custody first asks for its parent leaves custody re-parented (to init
// or a subreaper) on Linux and macOS, and that new parent is the one custody then serves: nothing
// records the original parent. The window is custody's first instructions; a caller that must
// not be outlived even then names itself with --owner PID, whose death before custody holds it is
// an error.
package caller

import (
	"errors"
	"fmt"
	"sync"

	"github.com/custody-dev/custody/procid"
)

// ErrNoParent: custody has no parent to serve (it is PID 1 of its PID namespace, or the parent is
// outside the namespace, where getppid(2) reads 0; on Windows, a process whose creator's PID reads
// 0, as one Wine starts from Linux does): "parent" means "self".
var ErrNoParent = errors.New("caller: no parent process to serve")

// heldHook, when set (by tests), runs once the handle is held and before the proof: a test makes
// the parent die there.
var heldHook func()

// Process is a proven handle on a process custody serves. Its methods are safe for concurrent
// use.
type Process struct {
	id   procid.ID
	done chan struct{}
	sys  sysProcess

	closeOnce sync.Once
	closeErr  error
}

// Parent returns the proven parent of the calling process: a handle on the PID getppid(2) names,
// then the proof that it is still the parent (Unix: getppid unchanged after the handle is held,
// so a parent that died and was replaced by a reaper between the two reads is caught; Windows: a
// creation time not later than the caller's own). It returns an error wrapping [ErrNoParent]
// when there is no parent to serve, and one wrapping [procid.ErrGone] when the parent is gone.
func Parent() (*Process, error) {
	p, err := parent()
	if errors.Is(err, ErrNoParent) {
		return nil, err // its text says it all
	}
	if err != nil {
		return nil, fmt.Errorf("caller: parent: %w", err)
	}
	return p, nil
}

// Open returns a proven handle on pid, any process: the handle first, then, through it, the proof
// that the process is alive and started no later than the calling process (one that started
// later cannot be the process whose PID was handed to it before it ran: its PID was recycled).
// A dead or recycled PID is an error wrapping [procid.ErrGone] or [procid.ErrReused].
func Open(pid int) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("caller: open pid %d: %w", pid, procid.ErrGone)
	}
	p, err := open(pid)
	if err != nil {
		return nil, fmt.Errorf("caller: open pid %d: %w", pid, err)
	}
	return p, nil
}

// PID returns the process's PID.
func (p *Process) PID() int { return p.id.PID }

// ID returns the incarnation proven at open: its PID and start, for the record.
func (p *Process) ID() procid.ID { return p.id }

// Done returns a channel closed once the process has ended, by any cause. After [Process.Close]
// it is never closed, unless it was already.
func (p *Process) Done() <-chan struct{} { return p.done }

// Close releases the handle and ends the watch. It is safe to call more than once.
func (p *Process) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.sys.close() })
	return p.closeErr
}

// notLater proves a start read through a handle against the calling process's: the process
// watched must have started no later than custody did. Starts of one clock tick are equal (Linux
// 10 ms, Windows ≤ 15.6 ms): a parent and a child started in one tick are both accepted, which
// leaves a PID recycled within the tick of custody's own start undetected.
func notLater(id procid.ID) error {
	self, err := procid.Self()
	if err != nil {
		return err
	}
	if id.Start > self.Start {
		return fmt.Errorf("pid %d started after this process (%v, this one %v): its pid was reused: %w",
			id.PID, id, self.ID, procid.ErrReused)
	}
	return nil
}
