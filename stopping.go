package custody

import "github.com/custody-dev/custody/stop"

// The stop's types and outcomes, named here so that a program that starts and stops children
// needs no import but custody. Each is the stop package's own: values pass between the two
// freely.
type (
	// StopOptions tunes [Child.Stop] and a [Slot]'s stops; the zero value uses the defaults.
	StopOptions = stop.Options
	// StopResult is what one stop did: its [Outcome], whether the kill was needed, and why.
	StopResult = stop.Result
	// Outcome is the typed result of a stop; only [Exited] and [AlreadyExited] prove the end.
	Outcome = stop.Outcome
)

// The outcomes of a stop.
const (
	Exited           = stop.Exited           // seen to exit after the stop (a scope: every member)
	AlreadyExited    = stop.AlreadyExited    // had exited before the stop; nothing was signalled
	NoAuthority      = stop.NoAuthority      // identity unproven; nothing was signalled
	PermissionDenied = stop.PermissionDenied // the OS refused the signal
	TimedOut         = stop.TimedOut         // signalled, but the exit was not seen before the deadline
)
