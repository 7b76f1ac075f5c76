package scope_test

import (
	"os"
	"testing"
)

// Holds finds the child and its descendant in the job, and not the test itself.
func TestHolds(t *testing.T) {
	p, s := startScoped(t, "-depth", "1")
	ids := ready(t, p)
	want := map[int]bool{ids[0].PID: true, ids[1].PID: true, os.Getpid(): false}
	for pid, in := range want {
		if got, err := s.Holds(pid); err != nil || got != in {
			t.Errorf("%v.Holds(%d) = %v, %v; want %v", s, pid, got, err, in)
		}
	}
}
