package cli

// processGroup returns 0: Windows has no process groups in the POSIX sense.
func processGroup() int { return 0 }
