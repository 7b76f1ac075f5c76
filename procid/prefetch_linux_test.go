package procid

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
)

// TestPrefetch: reads made ahead, in batches on another goroutine, judge every record as
// ReadRecords does: live processes alive by their pidfs ids, zombies dead, another id dead, an
// unusable id falling back to the start ticks, and a PID also named by a record without an id
// read again from /proc. More processes than one batch, so that the reading goroutine runs.
func TestPrefetch(t *testing.T) {
	requirePidfs(t)
	const n = batchSize + 10
	var cmds []*exec.Cmd
	var incs []Incarnation
	for range n {
		c := exec.Command("cat")
		if _, err := c.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		inc, err := ReadExact(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		cmds, incs = append(cmds, c), append(incs, inc)
	}
	zombies := map[int]bool{3: true, batchSize - 1: true, batchSize + 2: true}
	for i := range zombies {
		if err := cmds[i].Process.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range zombies { // killed, not waited for: zombies until the cleanup
		testproc.WaitFor(t, 10*time.Second, func() error {
			if s, _ := ReadChild(incs[i].PID); !s.Zombie {
				return fmt.Errorf("pid %d is not a zombie yet", incs[i].PID)
			}
			return nil
		})
	}
	type want struct {
		rec   Record
		state State
	}
	var cases []want
	for i, inc := range incs {
		id, start, boot := inc.PidfdID, inc.Start, inc.BootID
		w := want{Record{PID: inc.PID, PidfdID: &id, BootID: &boot}, Alive}
		switch {
		case zombies[i]:
			w.state = Dead
		case i == 5:
			other := id + 1
			w = want{Record{PID: inc.PID, PidfdID: &other, StartTicks: &start, BootID: &boot}, Dead}
		case i == 6:
			zero, wrong := uint64(0), start+1
			w = want{Record{PID: inc.PID, PidfdID: &zero, StartTicks: &wrong, BootID: &boot}, Dead}
		case i == 7: // also named without an id
			cases = append(cases, want{Record{PID: inc.PID, StartTicks: &start, BootID: &boot}, Alive})
		}
		cases = append(cases, w)
	}
	fds := openFDs(t)
	recs := make([]Record, len(cases))
	ahead := NewPrefetch()
	for i, c := range cases {
		recs[i] = c.rec
		ahead.Add(c.rec)
	}
	for name, reads := range map[string]Reads{"prefetch": ahead.Reads(), "ReadRecords": ReadRecords(recs)} {
		for _, c := range cases {
			if s, _ := reads.Check(c.rec, true); s != c.state {
				t.Errorf("%s: pid %d (%+v): %v, want %v", name, c.rec.PID, c.rec, s, c.state)
			}
		}
		if res := reads[incs[7].PID]; res.byPidfs || res.Inc.Start != incs[7].Start {
			t.Errorf("%s: pid %d, named with and without an id, read %+v; want a /proc read", name, incs[7].PID, res)
		}
	}
	if now := openFDs(t); now != fds {
		t.Errorf("%d descriptors open after the reads, %d before", now, fds)
	}
}

// openFDs counts the test process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestPrefetchOnce: a PID added many times is read once.
func TestPrefetchOnce(t *testing.T) {
	requirePidfs(t)
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	ahead := NewPrefetch()
	for range 3 * batchSize {
		ahead.Add(Record{PID: self.PID, PidfdID: &self.PidfdID, BootID: &self.BootID})
	}
	if reads := ahead.Reads(); len(reads) != 1 {
		t.Errorf("reads of one PID added many times: %d, want 1", len(reads))
	}
}
