// Package sockdir keeps the private directories that custody makes in the shared temporary
// directory to hold one Unix socket each (a supervisor's nest socket, a giver's grant socket),
// and removes the ones their makers left.
//
// A process that listens there, and any that may still need the name, holds a shared flock(2)
// on the directory ([Lock]) for as long as it does. The kernel drops a process's locks when it
// dies, however it dies, so a directory nobody locks is garbage: its makers are gone (killed
// together, say: a container's or a CI job's whole tree SIGKILLed), and nobody will listen
// there again. [Sweep] removes such directories. The lock is the proof no guess replaces: a
// directory's age says nothing of whether a process still holds its name, and a refused
// connect(2) says nothing of a directory made and not yet listened in.
//
//	OS       the lock                  the sweep's reading of the directory
//	Linux    flock(2) on an open       getdents64 into one buffer, no string per file
//	         descriptor of the
//	         directory
//	macOS    the same                  os.File.Readdirnames, a batch at a time
//	others   none: [Lock] is only its zero value, and nothing here makes or sweeps
package sockdir

import "errors"

// ErrMoved says that no directory is at the path, or that the one locked no longer is: a sweeper
// removed it between its making and its lock. Make it again.
var ErrMoved = errors.New("sockdir: the directory was removed or replaced while it was locked")
