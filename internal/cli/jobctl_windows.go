package cli

// followStops has nothing to follow on Windows: a console has no job control.
func (t *terminal) followStops(pid, pgid int) {}
