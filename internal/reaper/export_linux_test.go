package reaper

import "os"

// Reap runs one pass at once, as a SIGCHLD would, and reports whether it left a zombie to a pidfd
// that names it.
func Reap(r *Reaper) bool { return r.reap() }

// Idle returns a reaper that reaps only when asked ([Reaper.Stop], Reap), with no pass of its own
// on SIGCHLD. The test process must be a subreaper already.
func Idle() *Reaper {
	r := &Reaper{sigs: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{}), reaps: true}
	close(r.done)
	return r
}
