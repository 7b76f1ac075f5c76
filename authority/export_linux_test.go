package authority

// PidfdErr is the pidfd probe's memo; tests replace it to force the handle-less fallback.
var PidfdErr = &pidfdErr

// ProbePidfd runs the probe afresh.
var ProbePidfd = probePidfd
