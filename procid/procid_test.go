package procid

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
)

// The test binary is its own helper process (internal/testproc). A helper that blocks reads
// stdin, its lifeline: if the test dies, the pipe's write end closes and the helper exits, so a
// broken test cannot leak it.
func TestMain(m *testing.M) {
	testproc.Register("block-stdin", func([]string) int {
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
	testproc.Main(m)
}

// startBlocking starts a block-stdin helper.
func startBlocking(t *testing.T) *testproc.Proc {
	t.Helper()
	return testproc.Start(t, testproc.Helper(t, "block-stdin"))
}

// requireRead skips on platforms where procid cannot read processes.
func requireRead(t *testing.T) {
	t.Helper()
	if _, err := Self(); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("skipping: reading processes is unsupported: %v", err)
	}
}

// checkGone asserts that id is gone after its process was reaped. The PID is free by then and
// may already name a new process (Windows recycles PIDs eagerly): that is accepted only when the
// new process is provably another incarnation.
func checkGone(t *testing.T, id ID) {
	t.Helper()
	inc, err := Read(id.PID)
	if err == nil {
		if inc.Start == id.Start {
			t.Fatalf("Read(%d) after exit = %v, the exited incarnation", id.PID, inc.ID)
		}
		t.Logf("pid %d already recycled as %v", id.PID, inc.ID)
		if err := id.Verify(); !errors.Is(err, ErrReused) {
			t.Errorf("Verify(%v) on a recycled PID = %v, want ErrReused", id, err)
		}
		return
	}
	if !errors.Is(err, ErrGone) {
		t.Errorf("Read(%d) after exit = %v, want ErrGone", id.PID, err)
	}
	if err := id.Verify(); !errors.Is(err, ErrGone) {
		t.Errorf("Verify(%v) after exit = %v, want ErrGone", id, err)
	}
	if Exists(id.PID) {
		t.Errorf("Exists(%d) after exit = true", id.PID)
	}
}

func TestReadLiveThenKilled(t *testing.T) {
	requireRead(t)
	p := startBlocking(t)
	pid := p.Process.Pid
	inc, err := Read(pid)
	if err != nil {
		t.Fatalf("Read(%d) of a live helper: %v", pid, err)
	}
	t.Logf("helper: %v create %.6f ppid %d pgid %d boot %q", inc.ID, inc.CreateTime, inc.PPID, inc.PGID, inc.BootID)
	if inc.PID != pid || inc.Start == 0 {
		t.Errorf("Read(%d) = %v, want pid %d and a non-zero start", pid, inc.ID, pid)
	}
	if d := time.Since(time.Unix(0, int64(inc.CreateTime*1e9))); d < -time.Second || d > 10*time.Second {
		t.Errorf("CreateTime %.3f is %v from now, want within seconds", inc.CreateTime, d)
	}
	if inc.PPID != os.Getpid() {
		t.Errorf("PPID = %d, want the test process %d", inc.PPID, os.Getpid())
	}
	if err := inc.Verify(); err != nil {
		t.Errorf("Verify(%v) of a live helper: %v", inc.ID, err)
	}
	if !Exists(pid) {
		t.Errorf("Exists(%d) of a live helper = false", pid)
	}

	if err := p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Before Wait the process lingers (a zombie, or on Windows a process object held open by
	// os.Process's handle): it is gone already.
	testproc.WaitFor(t, 10*time.Second, func() error {
		if _, err := Read(pid); !errors.Is(err, ErrGone) {
			return fmt.Errorf("Read(%d) of a killed, unwaited helper = %v, want ErrGone", pid, err)
		}
		return nil
	})
	if err := inc.Verify(); !errors.Is(err, ErrGone) {
		t.Errorf("Verify(%v) of a killed, unwaited helper = %v, want ErrGone", inc.ID, err)
	}
	p.Wait()
	checkGone(t, inc.ID)
}

func TestReadExitOnLifelineClose(t *testing.T) {
	requireRead(t)
	p := startBlocking(t)
	inc, err := Read(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	if err := p.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	checkGone(t, inc.ID)
}

func TestRecordCheck(t *testing.T) {
	requireRead(t)
	p := startBlocking(t)
	inc, err := Read(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var bootID *string
	if inc.BootID != "" {
		bootID = &inc.BootID
	}
	wrong := inc.Start + 1
	off := inc.CreateTime - 10
	near := inc.CreateTime + 1.5
	tests := []struct {
		name   string
		r      Record
		strict bool
		state  State
		proof  Proof
	}{
		{"exact", Record{PID: inc.PID, StartTicks: &inc.Start, BootID: bootID}, true, Alive, ExactProof},
		{"wrong start", Record{PID: inc.PID, StartTicks: &wrong, BootID: bootID}, true, Dead, NoProof},
		{"create time", Record{PID: inc.PID, CreateTime: &inc.CreateTime}, true, Alive, EpochProof},
		{"create time 1.5 s off", Record{PID: inc.PID, CreateTime: &near}, true, Alive, EpochProof},
		{"create time 10 s off", Record{PID: inc.PID, CreateTime: &off}, true, Dead, NoProof},
		{"nothing, strict", Record{PID: inc.PID}, true, Unknown, NoProof},
		{"nothing, lenient", Record{PID: inc.PID}, false, Alive, NoProof},
		{"pid 0", Record{PID: 0, StartTicks: &inc.Start}, false, Dead, NoProof},
	}
	for _, tt := range tests {
		state, proof := tt.r.Check(tt.strict)
		if state != tt.state || proof != tt.proof {
			t.Errorf("%s: Check(%v) = %v, %v; want %v, %v", tt.name, tt.strict, state, proof, tt.state, tt.proof)
		}
	}
}

func TestReadNonPositive(t *testing.T) {
	for _, pid := range []int{0, -1} {
		if _, err := Read(pid); !errors.Is(err, ErrGone) {
			t.Errorf("Read(%d) = %v, want ErrGone", pid, err)
		}
		if Exists(pid) {
			t.Errorf("Exists(%d) = true", pid)
		}
	}
}

func TestSelf(t *testing.T) {
	requireRead(t)
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if self.PID != os.Getpid() || self.Start == 0 {
		t.Errorf("Self() = %v, want pid %d and a non-zero start", self.ID, os.Getpid())
	}
	if now := float64(time.Now().UnixNano()) / 1e9; self.CreateTime <= 0 || self.CreateTime > now+1 {
		t.Errorf("Self().CreateTime = %.3f, now %.3f", self.CreateTime, now)
	}
	again, err := Read(os.Getpid())
	if err != nil || again.PID != self.PID || again.Start != self.Start || math.Abs(again.CreateTime-self.CreateTime) > 1e-6 {
		t.Errorf("Read(self) = %v, %v; Self() = %v", again, err, self)
	}
	if err := self.Verify(); err != nil {
		t.Errorf("Self().Verify() = %v", err)
	}
	if err := (ID{PID: self.PID, Start: self.Start + 1}).Verify(); !errors.Is(err, ErrReused) {
		t.Errorf("Verify with another start = %v, want ErrReused", err)
	}
}

// Of computes from an identity what Read reports of the same process.
func TestOf(t *testing.T) {
	requireRead(t)
	p := startBlocking(t)
	read, err := ReadChild(p.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	of, err := Of(read.ID)
	if err != nil {
		t.Fatal(err)
	}
	if of.ID != read.ID || of.BootID != read.BootID || math.Abs(of.CreateTime-read.CreateTime) > 1e-6 || math.Abs(of.BootStart-read.BootStart) > 1e-6 {
		t.Errorf("Of(%v) = %+v, Read = %+v", read.ID, of, read)
	}
	if of.CreateTime <= 0 {
		t.Errorf("Of(%v).CreateTime = %v", read.ID, of.CreateTime)
	}
}
