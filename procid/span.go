package procid

// A Span brackets the fork of a child between two readings of the clock a process's start is
// counted by, so that the child's start can be known without reading the child: on Linux,
// /proc/PID/stat's start is the boot-time clock (CLOCK_BOOTTIME) read when the kernel forked the
// process, in whole clock ticks, and a child forked between two readings that fall within one
// tick started in that tick. Where they do not (a span crosses a tick boundary about once in
// seventy for a 150 µs start at 100 ticks a second), or elsewhere than Linux, the span tells
// nothing, and the child must be read. The zero Span tells nothing.
type Span struct {
	from, to uint64 // the clock's readings in nanoseconds; 0 when not read
}

// BeginSpan reads the clock before a fork.
func BeginSpan() Span { return Span{from: bootClock()} }

// End reads the clock after the fork has returned.
func (s *Span) End() { s.to = bootClock() }

// Start returns the start, as [ID.Start] counts it, of a child the caller forked between
// [BeginSpan] and [Span.End], and whether the span tells it.
func (s Span) Start() (uint64, bool) { return s.start() }
