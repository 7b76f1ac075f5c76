package procid

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseStat reads real and hand-made /proc/PID/stat lines whose command names hold spaces,
// parentheses and newlines: the fields are found after the last ')'.
func TestParseStat(t *testing.T) {
	tests := []struct {
		file string
		want Incarnation
	}{
		{"plain", Incarnation{ID: ID{Start: 95179}, PPID: 8262, PGID: 8262}},
		{"kthread", Incarnation{ID: ID{Start: 19}}},
		{"zombie-parens", Incarnation{ID: ID{Start: 777}, PPID: 1, PGID: 4242, Zombie: true}},
		{"newline-paren", Incarnation{ID: ID{Start: 123456789}, PPID: 100, PGID: 31337}},
	}
	for _, tc := range tests {
		b, err := os.ReadFile(filepath.Join("testdata", "stat", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseStat(b)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.file, diff)
		}
	}
}

func TestParseStatBadInput(t *testing.T) {
	tests := []struct{ desc, input string }{
		{"empty", ""},
		{"no parenthesis", "123 cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5"},
		{"nothing after name", "123 (cat)"},
		{"truncated before start", "123 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0"},
		{"start not a number", "123 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 x1"},
		{"state too long", "123 (cat) RS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5"},
		{"ppid not a number", "123 (cat) R one 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5"},
	}
	for _, tc := range tests {
		if got, err := parseStat([]byte(tc.input)); !errors.Is(err, errStat) {
			t.Errorf("%s: parseStat(%q) = %+v, %v; want errStat", tc.desc, tc.input, got, err)
		}
	}
}

// TestReadSelfBoot: a read carries this boot's id, and the boot start agrees with the ticks.
func TestReadSelfBoot(t *testing.T) {
	inc, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := BootID()
	if inc.BootID != boot || boot == "" {
		t.Errorf("boot id %q, want %q", inc.BootID, boot)
	}
	if inc.BootStart*100 < float64(inc.Start)-0.5 || inc.BootStart*100 > float64(inc.Start)+0.5 {
		t.Errorf("boot start %v s does not match %d ticks at 100 Hz", inc.BootStart, inc.Start)
	}
}

// BenchmarkRead is one incarnation read: the unit cost of every proof.
func BenchmarkRead(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		if _, err := Read(pid); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCreateTimeAfterClockStep: a create time follows /proc/stat's btime as it stands, the way
// psutil's does, also after the wall clock was stepped since this process first read it. The
// step is simulated by leaving behind what a read before a step of 100 s would have kept: the
// btime 100 s off, with the clocks' offset of that moment. (Stepping the machine's clock for real
// would disturb every other process on it.)
func TestCreateTimeAfterClockStep(t *testing.T) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	now, err := parseBtime(stat)
	if err != nil {
		t.Fatal(err)
	}
	kept := btime.Load()
	t.Cleanup(func() { btime.Store(kept) })
	createTime := func() float64 {
		t.Helper()
		inc, err := Read(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		return inc.CreateTime - inc.BootStart
	}

	btime.Store(&btimeRead{btime: now - 100, skew: clockSkew() - 100*time.Second})
	if got := createTime(); math.Abs(got-now) > 0.5 {
		t.Errorf("after a step, create time - boot start = %v, want btime %v", got, now)
	}
	// Without a step the kept value stands: the check above passed by noticing the step, not by
	// reading /proc/stat every time.
	btime.Store(&btimeRead{btime: now - 100, skew: clockSkew()})
	if got := createTime(); math.Abs(got-(now-100)) > 0.5 {
		t.Errorf("without a step, create time - boot start = %v, want the kept %v", got, now-100)
	}
}
