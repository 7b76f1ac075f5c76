package procid

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
)

// requirePidfs skips where the kernel has no pidfs ids (Linux before 6.9).
func requirePidfs(t *testing.T) {
	t.Helper()
	if err := PidfsError(); err != nil {
		testproc.Skip(t, "skipping: pidfs ids unavailable: %v", err)
	}
}

func TestPidfsIDs(t *testing.T) {
	requirePidfs(t)
	p := startBlocking(t)
	inc, err := ReadExact(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if inc.PidfdID == 0 || self.PidfdID == 0 || inc.PidfdID == self.PidfdID {
		t.Fatalf("pidfs ids: child %d, self %d; want two distinct non-zero ids", inc.PidfdID, self.PidfdID)
	}
	held, err := HandleID(p.Process)
	if err != nil || held != inc.PidfdID {
		t.Errorf("HandleID = %d, %v; ReadExact's id %d", held, err, inc.PidfdID)
	}
	if err := inc.Verify(); err != nil {
		t.Errorf("Verify(%v) of a live child: %v", inc.ID, err)
	}
	other := inc.ID
	other.PidfdID++
	if err := other.Verify(); !errors.Is(err, ErrReused) {
		t.Errorf("Verify(%v), another pidfs id, same start = %v; want ErrReused", other, err)
	}
	if err := p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// A zombie: pidfd_open still opens it, and it is dead.
	testproc.WaitFor(t, 10*time.Second, func() error {
		if err := inc.Verify(); !errors.Is(err, ErrGone) {
			return fmt.Errorf("Verify(%v) of a killed, unwaited child = %v, want ErrGone", inc.ID, err)
		}
		return nil
	})
	rec := Record{PID: inc.PID, PidfdID: &inc.PidfdID, BootID: &inc.BootID}
	if s, _ := ReadRecords([]Record{rec}).Check(rec, true); s != Dead {
		t.Errorf("a zombie's record checks %v, want dead", s)
	}
	p.Wait()
	if err := inc.Verify(); !errors.Is(err, ErrGone) && !errors.Is(err, ErrReused) {
		t.Errorf("Verify(%v) after the reap = %v, want ErrGone or ErrReused", inc.ID, err)
	}
}

// TestRecordPidfsID: a record's pidfs id decides when it is usable (positive, under this boot)
// and the read has one; otherwise the start ticks do. An unusable id never matches.
func TestRecordPidfsID(t *testing.T) {
	requirePidfs(t)
	p := startBlocking(t)
	inc, err := ReadExact(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	id, other, zero := inc.PidfdID, inc.PidfdID+1, uint64(0)
	boot, otherBoot := inc.BootID, "0"+inc.BootID[1:]
	if otherBoot == boot {
		otherBoot = "1" + inc.BootID[1:]
	}
	wrongStart := inc.Start + 1
	tests := []struct {
		name  string
		r     Record
		state State
		proof Proof
	}{
		{"same id, same start", Record{PID: inc.PID, PidfdID: &id, StartTicks: &inc.Start, BootID: &boot}, Alive, ExactProof},
		{"same id, no start", Record{PID: inc.PID, PidfdID: &id, BootID: &boot}, Alive, ExactProof},
		{"another id, same start", Record{PID: inc.PID, PidfdID: &other, StartTicks: &inc.Start, BootID: &boot}, Dead, NoProof},
		{"id 0, same start: ticks decide", Record{PID: inc.PID, PidfdID: &zero, StartTicks: &inc.Start, BootID: &boot}, Alive, ExactProof},
		{"id 0, another start", Record{PID: inc.PID, PidfdID: &zero, StartTicks: &wrongStart, BootID: &boot}, Dead, NoProof},
		{"id 0 alone", Record{PID: inc.PID, PidfdID: &zero, BootID: &boot}, Unknown, NoProof},
		{"same id, no boot id: never a match", Record{PID: inc.PID, PidfdID: &id}, Unknown, NoProof},
		{"same id, another boot", Record{PID: inc.PID, PidfdID: &id, StartTicks: &inc.Start, BootID: &otherBoot}, Dead, NoProof},
	}
	for _, tt := range tests {
		for _, reads := range []Reads{ReadRecords([]Record{tt.r}), ReadMany([]int{tt.r.PID}), {}} {
			state, proof := reads.Check(tt.r, true)
			if state != tt.state || proof != tt.proof {
				t.Errorf("%s: Check = %v, %v; want %v, %v", tt.name, state, proof, tt.state, tt.proof)
			}
		}
	}
}

// TestReadRecordsMixed: a PID named by a record with a pidfs id and by one without is read so
// that both can be judged.
func TestReadRecordsMixed(t *testing.T) {
	requirePidfs(t)
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	withID := Record{PID: self.PID, PidfdID: &self.PidfdID, BootID: &self.BootID}
	withTicks := Record{PID: self.PID, StartTicks: &self.Start, BootID: &self.BootID}
	for _, recs := range [][]Record{{withID}, {withID, withTicks}, {withTicks, withID}} {
		reads := ReadRecords(recs)
		for _, r := range []Record{withID, withTicks} {
			if s, proof := reads.Check(r, true); s != Alive || proof != ExactProof {
				t.Errorf("records %d: Check(%+v) = %v, %v; want alive, exact", len(recs), r, s, proof)
			}
		}
		if res := reads.Get(self.PID); res.Err != nil || res.Inc.Start != self.Start || res.Inc.PPID != os.Getppid() {
			t.Errorf("Get(self) = %+v; want the whole incarnation", res)
		}
	}
}
