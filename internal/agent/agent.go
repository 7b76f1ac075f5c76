// Package agent is custody agent's server: one long-lived owner that a program in any language
// drives over a local socket with JSON lines, passing descriptors (docs/agent.md is the protocol).
// Every child is started through a [custody.Owner], born in its scope and covered before it
// runs; the agent's owner is its client, so when the client ends (its connection reaches end of
// file, or its process ends) the agent stops every child it holds, each with its own grace, and
// [Serve] returns.
//
//	OS       transport                                   descriptors
//	Linux,   a Unix-domain stream socket: an inherited   SCM_RIGHTS, attributed to a message by
//	macOS    socketpair end, or one client accepted      the stream offset they arrived at
//	         on a private listening socket
//	Windows  a named pipe with a user-only DACL, one     handles named in the messages and
//	         instance, its client proven at connect      duplicated between the processes
//	         (--fd: ErrUnsupported)                      (DuplicateHandle): "handles" fields
//
// Bad input never ends the agent or a child: a line that is not JSON, an unknown op, a line over
// [MaxLine], descriptors that do not match what a message declares, a PID the agent does not hold
// are each answered with an error reply, and the agent reads on.
package agent

import (
	"github.com/custody-dev/custody/procid"
	"io"
	"time"

	"github.com/custody-dev/custody/ledger"
)

// Config is what an agent is started with.
type Config struct {
	// Ledger records the children; nil opens the default ledger.
	Ledger *ledger.Ledger
	// Install is the install id of rows and tags; empty derives it from the executable.
	Install string
	// TagEnv names the spawn tag variable of a start that names none.
	TagEnv string
	// Grace is the default grace of start and of the final stop, and the supervisor's: how long
	// the children have between the request to exit and the kill. 0 means 3 s.
	Grace time.Duration
	// Version is the hello event's version: the build's.
	Version string
	// Stderr receives the agent's diagnostics (supervisor losses, failed final stops); nil
	// discards them.
	Stderr io.Writer
	// OwnerDone, when not nil, is closed when the client process has ended: the agent ends then,
	// as at the connection's end of file, even while another process (which inherited a copy of
	// the socket) keeps the connection open.
	OwnerDone <-chan struct{}
	// Caller, when not nil, is the client process: every child's row records it as the process
	// its owner serves (caller_pid), as custody run's rows record their caller.
	Caller *procid.ID
}
