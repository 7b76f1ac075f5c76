package cli_test

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// timeThread runs fn on one locked thread and returns its wall time and the thread's CPU time.
func timeThread(b *testing.B, fn func()) (wall, cpu time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r0, r1 unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &r0); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	fn()
	wall = time.Since(t0)
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &r1); err != nil {
		b.Fatal(err)
	}
	used := func(r unix.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return wall, used(r1) - used(r0)
}
