//go:build unix

package agent

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// signalByName returns the signal named name ("SIGTERM"), or 0.
func signalByName(name string) syscall.Signal { return unix.SignalNum(name) }
