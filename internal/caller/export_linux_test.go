package caller

// UsePolling makes the watch poll, as it does where the kernel has no pidfd.
func UsePolling() { usePidfd = func() bool { return false } }
