package jsonscan_test

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// cpuTimer reports the CPU time the benchmark's own thread spent per op, as cpu-ns/op: on a
// machine loaded by other work, wall time counts the time the thread waited for a CPU, and CPU
// time does not. Call it before the loop and the returned func after it.
func cpuTimer(b *testing.B) func() {
	runtime.LockOSThread()
	start := threadCPU(b)
	return func() {
		b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
		runtime.UnlockOSThread()
	}
}

func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}
