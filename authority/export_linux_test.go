package authority

// PidfdErr is the pidfd probe's memo; tests replace it to force the handle-less fallback.
var PidfdErr = &pidfdErr

// ProbePidfd runs the probe afresh.
var ProbePidfd = probePidfd

// ReadExit reads a process's exit status once (see Process.readExit).
func ReadExit(p *Process) (ExitStatus, bool, error) { return p.readExit() }
