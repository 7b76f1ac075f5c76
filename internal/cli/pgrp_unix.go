//go:build unix

package cli

import "syscall"

// processGroup returns the calling process's group.
func processGroup() int { return syscall.Getpgrp() }
