// Package authority turns a recorded process incarnation into a proven, retained handle, and
// signals only through it: a PID is observation, never authority.
//
// [Acquire] opens a handle on the PID first and only then proves, through a fresh read, that the
// PID still names the recorded incarnation ([procid.Record.Check] with strict=true: exact start
// under the same boot, or an epoch start within 2 s of a non-null recorded create time). Every
// later signal goes through that handle, so a PID recycled after the proof cannot redirect it.
// [FromOS] wraps a process custody started itself, whose spawn-time handle is the authority.
//
//	OS        handle                          signal               exit seen by
//	Linux     pidfd (pidfd_open, 5.3+)        pidfd_send_signal    poll on the pidfd
//	Windows   OpenProcess handle              TerminateProcess     WaitForSingleObject
//	macOS     none: the incarnation is        kill(2)              polling the incarnation
//	          re-proven before every signal
//
// Caveats, each named where it applies:
//   - Linux start ticks have USER_HZ (10 ms) resolution: a PID recycled within the tick its
//     previous holder started in is indistinguishable through /proc (see package procid). The
//     proof inherits that limit; the handle does not.
//   - macOS has no pidfd, and neither has Linux when pidfd_open is missing or filtered
//     ([PidfdError]): a signal there is preceded by a fresh identity check, and a window of
//     microseconds remains between that check and kill(2) in which the PID could be recycled.
//     [Process.Pinned] reports which kind of authority a [Process] holds.
//   - Process groups are scopes, not processes: package scope proves and signals them, through a
//     pidfd on the group's leader where the kernel can.
//
// Whatever a record proves, [Guard] refuses init, kernel threads, the caller and its ancestors
// ([ProtectedError]), and [CheckOwner] refuses a process that runs as another user than the one
// whose ledger recorded it: a record is a claim, not a licence.
//
// Errors are sorted for the stop outcomes: one wrapping [procid.ErrGone] means the process had
// already exited and nothing was signalled (already-exited); one wrapping [ErrNoAuthority] means
// identity could not be proven and nothing was signalled (no-authority); a signal the OS refused
// satisfies errors.Is(err, os.ErrPermission) (permission-denied). An error wrapping
// ErrNoAuthority wraps neither of the other two, so callers may test them in any order.
package authority

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/custody-dev/custody/procid"
)

// ErrNoAuthority reports that a process's or group's identity could not be proven: its PID now
// names another incarnation, its record comes from another boot or carries no usable start, it
// could not be read, or no handle could be opened. Nothing was signalled.
var ErrNoAuthority = errors.New("authority: no authority")

// Process is proven authority over one process incarnation. Its methods are safe for concurrent
// use. Close it when done: it holds a kernel handle (Linux, Windows).
type Process struct {
	id  procid.ID
	sys sysProcess // per-OS handle state

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	closing   chan struct{} // closed by Close, ends a pending watch

	watchOnce sync.Once
	done      chan struct{} // closed when the watch ends
	watchErr  error         // why it ended: nil means the process exited
	exitSeen  atomic.Bool   // handle-less modes remember an observed exit
}

func newProcess(id procid.ID, sys sysProcess) *Process {
	return &Process{id: id, sys: sys, closing: make(chan struct{}), done: make(chan struct{})}
}

// Acquire opens a handle on rec.PID and proves through a fresh read that it names the recorded
// incarnation. It returns an error wrapping [procid.ErrGone] when the recorded process has
// exited, and one wrapping [ErrNoAuthority] (saying why) when its identity cannot be proven: the
// PID was reused (the error also wraps [procid.ErrReused]), the record comes from another boot,
// it has neither an exact start nor a create time, or the process cannot be read.
//
// On macOS, and on Linux without pidfd, no handle exists: Acquire proves the identity once and
// every [Process.Signal] proves it again immediately before kill(2).
func Acquire(rec procid.Record) (*Process, error) {
	if rec.PID <= 0 {
		return nil, fmt.Errorf("%w over pid %d: not a process id", ErrNoAuthority, rec.PID)
	}
	// A record from another boot is dead by rule: its ticks count from another boot, so no read
	// of today's process could prove anything about it.
	if rec.BootID != nil {
		if boot, err := procid.BootID(); err == nil && boot != *rec.BootID {
			return nil, fmt.Errorf("%w over pid %d: recorded under boot %s, this is boot %s",
				ErrNoAuthority, rec.PID, *rec.BootID, boot)
		}
	}
	return acquire(rec)
}

// FromOS wraps a process custody started itself. The handle taken at spawn is the authority, so
// nothing is proven: p must come from [os.StartProcess] or [os/exec], never from
// [os.FindProcess], which opens a handle on whatever holds the PID now. FromOS duplicates p's
// handle where one exists (Linux pidfd, Windows), so p stays the caller's to Wait (reap) and
// Release; without one (macOS, Linux without pidfd) signals go through p itself, which Go keeps
// from reaching a recycled PID as long as the caller reaps only through p.
//
// Call it before p is waited for. Afterwards it returns an error wrapping [procid.ErrGone] on
// Unix, and on Windows, where os.Process.Wait releases the handle and a waited process can no
// longer be told from a released one, an error wrapping [ErrNoAuthority].
func FromOS(p *os.Process) (*Process, error) { return fromOS(p) }

// FromChild is [FromOS] for a child whose incarnation the caller read from the unreaped child
// already (as a scope does at spawn): on Linux with pidfd, id becomes the Process's ID, and the
// read FromOS makes only to show it is skipped; the pidfd remains the authority. Elsewhere it is
// FromOS, whose read there is the identity each signal is checked against. id.PID must be p.Pid.
func FromChild(p *os.Process, id procid.ID) (*Process, error) {
	if id.PID != p.Pid {
		return nil, fmt.Errorf("authority: wrap pid %d: the incarnation given is pid %d's", p.Pid, id.PID)
	}
	return fromChild(p, id)
}

// PID returns the process's PID.
func (p *Process) PID() int { return p.id.PID }

// ID returns the incarnation: the one proven by [Acquire], or the one read by [FromOS] (Start is
// 0 when the child had already exited and could not be read).
func (p *Process) ID() procid.ID { return p.id }

// Pinned reports whether p signals through something that can never come to name another
// process: a pidfd, a Windows process handle, or the caller's own unreaped child. It is false
// where each signal is preceded by a fresh identity check instead (macOS, Linux without pidfd),
// which leaves a window of microseconds for a recycled PID.
func (p *Process) Pinned() bool { return p.pinned() }

// Signal sends sig to the process. It returns an error wrapping [procid.ErrGone] when the
// process has exited (nothing was signalled), one satisfying errors.Is(err, os.ErrPermission)
// when the OS refuses, and one wrapping [os.ErrClosed] after [Process.Close]. Success means the
// signal was accepted, never that the process exited: [Process.Wait] observes that.
//
// On Windows only [os.Kill] is supported (TerminateProcess with exit code 1); other signals
// return an error wrapping [errors.ErrUnsupported]. Signal 0 checks existence and permission on
// Unix.
func (p *Process) Signal(sig os.Signal) error {
	if p.closed.Load() {
		return fmt.Errorf("authority: signal pid %d: %w", p.id.PID, os.ErrClosed)
	}
	return p.signal(sig)
}

// The requests to exit that [Process.Ask] and a scope's Ask send, by name, as a stop reports them.
const (
	AskSIGTERM   = "SIGTERM"          // Unix
	AskWMClose   = "WM_CLOSE"         // Windows: what a top-level window's close button sends
	AskCtrlBreak = "CTRL_BREAK_EVENT" // Windows: Ctrl+Break in a console process group
)

// Ask asks the process to exit, the way its OS lets a program ask, and names the request it
// sent: a stop's first step, before the grace and the kill. Success means the request was
// delivered, never that the process exited. Errors are [Process.Signal]'s, and one wrapping
// [errors.ErrUnsupported] when no request can reach the process (nothing was sent).
//
// Unix: SIGTERM ([AskSIGTERM]). Windows, which has no SIGTERM: WM_CLOSE to the process's
// top-level windows on the caller's desktop ([AskWMClose]), through the handle that pins its PID.
// A console program gets nothing from Ask: a console control event reaches only processes on the
// sender's console, and only a whole console process group, which cannot be proven from outside
// to be the process's own (a child's owner can: see scope.Scope.Ask).
func (p *Process) Ask() (string, error) {
	if p.closed.Load() {
		return "", p.errClosed("ask")
	}
	return p.ask()
}

// Kill sends [os.Kill]: SIGKILL on Unix, TerminateProcess on Windows.
func (p *Process) Kill() error { return p.Signal(os.Kill) }

// Exited reports whether the process has exited. A zombie has exited. Where no handle exists, an
// incarnation that cannot be read is an error, never an exit.
func (p *Process) Exited() (bool, error) {
	if p.closed.Load() {
		return false, fmt.Errorf("authority: exited pid %d: %w", p.id.PID, os.ErrClosed)
	}
	return p.exited()
}

// Wait blocks until the process exits or ctx is done, and returns nil only when it saw the exit.
// It works for processes that are not the caller's children, and never reaps: a child's owner
// still waits for it through [os.Process.Wait]. When ctx ends first the error wraps
// context.Cause(ctx) (so errors.Is(err, context.DeadlineExceeded) tells a timeout); after
// [Process.Close] it wraps [os.ErrClosed]. Concurrent Waits share one watcher.
func (p *Process) Wait(ctx context.Context) error {
	if exited, err := p.Exited(); err == nil && exited {
		return nil
	}
	p.watchOnce.Do(func() {
		go func() {
			p.watchErr = p.watch()
			close(p.done)
		}()
	})
	select {
	case <-p.done:
		return p.watchErr
	case <-ctx.Done():
		select {
		case <-p.done: // an exit that raced the deadline still counts
			return p.watchErr
		default:
		}
		return fmt.Errorf("authority: wait pid %d: %w", p.id.PID, context.Cause(ctx))
	}
}

// Close releases the handle. Later calls to Signal, Exited and a pending or later Wait return an
// error wrapping [os.ErrClosed]. Close is idempotent.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.closing)
		p.closeErr = p.close()
	})
	return p.closeErr
}

func (p *Process) errClosed(op string) error {
	return fmt.Errorf("authority: %s pid %d: %w", op, p.id.PID, os.ErrClosed)
}

func (p *Process) errGone(op string) error {
	return fmt.Errorf("authority: %s pid %d: %w", op, p.id.PID, procid.ErrGone)
}

// PidfdError returns nil when this kernel offers everything custody uses of pidfd (pidfd_open,
// pidfd_send_signal, poll), and otherwise why not; outside Linux an error wrapping
// [errors.ErrUnsupported]. The probe runs once per process; custody doctor shows its result.
func PidfdError() error { return pidfdError() }
