package procid

// Kernel facts relied on (fs/proc/array.c, kernel/fork.c):
//
//	copy_process         sets task->start_boottime = ktime_get_boottime_ns(), inside the
//	                     clone/fork system call
//	/proc/PID/stat 22    nsec_to_clock_t(start_boottime + the reader's time namespace offset):
//	                     ns / (1e9 / USER_HZ), rounded down, where USER_HZ divides 1e9
//	clock_gettime        CLOCK_BOOTTIME is ktime_get_boottime plus the caller's time namespace
//	                     offset, monotonic across CPUs
//
// So a reading before the fork and one after it bound the child's start_boottime, both shifted
// by the same offset as the reader of its stat line sees it, and two readings in one tick name
// the tick.

import "golang.org/x/sys/unix"

func bootClock() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil || ts.Sec < 0 {
		return 0
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}

func (s Span) start() (uint64, bool) {
	b, err := boot()
	if err != nil || s.from == 0 || s.to < s.from {
		return 0, false
	}
	return spanTick(s.from, s.to, uint64(b.hz))
}

// spanTick returns the clock tick, at hz ticks a second, that both readings fall in.
func spanTick(from, to, hz uint64) (uint64, bool) {
	if hz == 0 || 1e9%hz != 0 { // the kernel then rounds otherwise
		return 0, false
	}
	per := 1e9 / hz
	if from/per != to/per {
		return 0, false
	}
	return from / per, true
}
