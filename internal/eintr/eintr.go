// Package eintr retries the system calls that a signal interrupted. A call interrupted by a
// signal handler (EINTR) did nothing and is to be made again: the Go runtime installs its
// handlers with SA_RESTART, which restarts most calls but not poll(2), epoll_wait(2), waitid(2)
// with some flags, or a read(2) of some files, and its preemption signal (SIGURG) reaches every
// thread of a running program. Every raw call custody makes through golang.org/x/sys goes
// through here rather than a loop of its own, as containerd's IgnoringEINTR.
package eintr

import "syscall"

// Retry calls f until it returns an error other than EINTR, and returns what that call returned.
func Retry[T any](f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err != syscall.EINTR {
			return v, err
		}
	}
}

// Ignoring calls f until it returns an error other than EINTR, and returns that error.
func Ignoring(f func() error) error {
	for {
		if err := f(); err != syscall.EINTR {
			return err
		}
	}
}
