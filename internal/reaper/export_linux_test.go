package reaper

// Reap runs one pass at once, as a SIGCHLD would, and reports whether it left a zombie to a pidfd
// that names it.
func Reap(r *Reaper) bool { return r.reap() }
