package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/internal/caller"
	"github.com/custody-dev/custody/procid"
)

// ownerHelp is what run's and adopt's help say of --owner.
const ownerHelp = `The child dies with its owner: by default (--owner parent) the program that called custody.
Before the child starts (before the grant is redeemed, for adopt) custody takes a handle on its
parent and proves it is still the parent (Linux: a pidfd, then getppid(2) again; macOS: kqueue
NOTE_EXIT, then getppid again; Windows: a process handle whose creation time is not later than
custody's). When the owner ends, by any cause (exit, crash, SIGKILL), custody stops the child's
whole scope as its own death would (the request to exit, the grace, the kill), says so on
standard error in one line, and exits 129. --owner PID names any other process (the caller behind
a wrapper such as npx, uvx or a shell script), proven alive through a handle at start and started
no later than custody (a later one holds a reused PID); --owner self ends the child only with
custody's own death (nohup-style use). With no parent (custody is PID 1 of its PID namespace),
parent means self. An owner already gone at start is refused: the child never starts. The row
records the owner (caller_pid; custody ps shows it as CALLER).`

// ownerFlag is run's and adopt's --owner.
func ownerFlag(dest *string) cli.Flag {
	return &cli.StringFlag{Name: "owner", Value: "parent", Destination: dest,
		Usage: "whose end ends the child: parent (custody's caller), a PID, or self"}
}

// takeOwner parses --owner (exactly parent, self, or a PID: anything else is a usage error) and
// takes the proven handle on the owner it names; nil means self, custody's own death alone.
func takeOwner(spec string) (*caller.Process, error) {
	switch spec {
	case "self":
		return nil, nil
	case "parent":
		p, err := caller.Parent()
		if errors.Is(err, caller.ErrNoParent) {
			return nil, nil
		}
		if err != nil {
			return nil, ownerRefused(spec, err)
		}
		return p, nil
	}
	// A PID as its digits alone: no sign, space or leading zero, which would make "+5" or "05"
	// a fourth form.
	pid, err := parsePID(spec)
	if err != nil || strconv.Itoa(pid) != spec {
		return nil, usagef("--owner %q: not parent, self or a PID", spec)
	}
	p, err := caller.Open(pid)
	if err != nil {
		return nil, ownerRefused(spec, err)
	}
	return p, nil
}

// ownerRefused says why the owner could not be taken, in one line: the child was not started.
func ownerRefused(spec string, err error) error {
	why := err.Error()
	switch {
	case errors.Is(err, procid.ErrReused):
		why = "it started after custody: its pid was reused by another process"
	case errors.Is(err, procid.ErrGone):
		why = "it has exited"
	}
	return fmt.Errorf("--owner %s: %s; the child was not started", spec, why)
}

// ownerDone returns the channel closed when the owner ends; nil, never ready, for self.
func ownerDone(p *caller.Process) <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.Done()
}

// ownerID is the owner's identity for the row, or nil for self.
func ownerID(p *caller.Process) *procid.ID {
	if p == nil {
		return nil
	}
	id := p.ID()
	return &id
}

// sayOwnerEnded says on stderr that the owner ended and the child's scope is being stopped.
// The owner's end often closes the pipe stderr is: SIGPIPE is caught first, so that the write
// fails with EPIPE instead of killing custody before it has stopped the child (caught, not
// ignored: an ignored signal would stay ignored in what the child execs).
func sayOwnerEnded(stderr io.Writer, verb string, owner *caller.Process, child int) {
	catchBrokenPipe()
	fmt.Fprintf(stderr, "custody: %s: owner pid %d ended; stopping pid %d's scope and exiting %d\n",
		verb, owner.PID(), child, exitOwnerGone)
}

// catchBrokenPipe catches SIGPIPE, once per process: a write to a closed pipe then fails with EPIPE
// instead of killing custody. The first Notify of a signal is a round trip to the runtime's signal
// thread; a second one is not made.
var catchBrokenPipe = sync.OnceFunc(func() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) })
