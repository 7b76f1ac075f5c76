package ledger

import "testing"

// TestSameIncarnationPidfsID: two rows of one PID, boot and start tick are one incarnation only
// when their pidfs ids (where both have one) are equal; a bad id is no id, and the ticks decide.
func TestSameIncarnationPidfsID(t *testing.T) {
	const base = `{"pid":42,"boot_id":"b","start_ticks":7`
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{base + `,"pidfd_id":9}`, base + `,"pidfd_id":9}`, true},
		{base + `,"pidfd_id":9}`, base + `,"pidfd_id":10}`, false}, // recycled within the tick
		{base + `,"pidfd_id":9}`, base + `}`, true},                // one side without: ticks
		{base + `,"pidfd_id":0}`, base + `,"pidfd_id":10}`, true},  // a bad id is none
		{base + `,"pidfd_id":"9"}`, base + `,"pidfd_id":9}`, true},
		{`{"pid":42,"start_ticks":7,"pidfd_id":9}`, `{"pid":42,"start_ticks":7,"pidfd_id":10}`, true}, // no boot: ticks
	} {
		if got := rowOf(t, tc.a).Record().Same(rowOf(t, tc.b).Record()); got != tc.same {
			t.Errorf("Same(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
