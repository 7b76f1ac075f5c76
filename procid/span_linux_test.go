package procid

import (
	"os/exec"
	"testing"
)

// TestSpanTick: the tick both readings fall in, none across a boundary or at a rate the kernel
// rounds otherwise.
func TestSpanTick(t *testing.T) {
	for _, tc := range []struct {
		from, to, hz uint64
		tick         uint64
		ok           bool
	}{
		{1_000_000_000, 1_000_150_000, 100, 100, true},
		{1_009_999_999, 1_009_999_999, 100, 100, true},
		{1_009_900_000, 1_010_050_000, 100, 0, false}, // crosses into tick 101
		{2_000_000_000, 2_000_100_000, 1000, 2000, true},
		{1_000_000_000, 1_000_000_100, 0, 0, false},
		{1_000_000_000, 1_000_000_100, 3, 0, false}, // 1e9 is not a multiple of 3
	} {
		tick, ok := spanTick(tc.from, tc.to, tc.hz)
		if tick != tc.tick || ok != tc.ok {
			t.Errorf("spanTick(%d, %d, %d) = %d, %v; want %d, %v", tc.from, tc.to, tc.hz, tick, ok, tc.tick, tc.ok)
		}
	}
	if _, ok := (Span{}).Start(); ok {
		t.Errorf("the zero Span tells a start")
	}
	if _, ok := (Span{from: 2e9, to: 1e9}).Start(); ok {
		t.Errorf("a span that ends before it begins tells a start")
	}
}

// TestSpanStart: for children forked within a span, the start the span tells is the one
// /proc/PID/stat shows, every time it tells one; it tells one for most of them.
func TestSpanStart(t *testing.T) {
	const n = 200
	told := 0
	for range n {
		cmd := exec.Command("/bin/true")
		s := BeginSpan()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s.End()
		inc, err := ReadChild(cmd.Process.Pid) // unreaped: its PID is still its own
		cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		start, ok := s.Start()
		if !ok {
			continue
		}
		told++
		if start != inc.Start {
			t.Errorf("pid %d: the span tells start %d, /proc shows %d (span %d..%d ns)", inc.PID, start, inc.Start, s.from, s.to)
		}
	}
	// A start takes well under a tick (10 ms at 100 Hz) even on a loaded machine: most spans
	// fall within one.
	if told < n/2 {
		t.Errorf("the span told the start of %d children of %d", told, n)
	}
}
