// Package reaper makes a process the child subreaper of its descendants and reaps the orphans
// re-parented to it, as an init does, without ever taking a child's exit status from the waiter
// that started it. custody run (also as the init of a PID namespace) and custody agent use it.
//
// The rule is exact, not a guess from timing: an exited child is reaped here only when no pidfd
// of this process names it, and os/exec holds a pidfd on every child it starts from the clone
// until its Wait has reaped it. A child with a waiter is therefore never touched, however late
// that waiter runs.
//
// Linux only: macOS and Windows have no child subreaper, and orphans go to launchd or nowhere as
// always; there [Start] returns a reaper that does nothing and an error wrapping
// [errors.ErrUnsupported].
package reaper

import "time"

// Start makes this process a child subreaper and reaps, from each SIGCHLD on, every exited child
// that no pidfd of this process names: the orphans of its descendants. It returns the reaper and,
// when this process could not be made a subreaper, why; the reaper then still reaps what is
// re-parented to it as the init of a PID namespace (which is a subreaper by nature), and is
// always safe to [Reaper.Stop] and [Reaper.Close].
func Start() (*Reaper, error) { return start() }

// Stop stops the orphans still alive (SIGTERM, up to grace, SIGKILL) and reaps them, and reports
// how many it signalled. Each is signalled through a pidfd opened on it and proven to be this
// process's child that no pidfd of a waiter names, never by a PID alone.
func (r *Reaper) Stop(grace time.Duration) int { return r.stop(grace) }

// Close stops reaping. Orphans that exit afterwards stay zombies until this process exits.
func (r *Reaper) Close() { r.close() }
