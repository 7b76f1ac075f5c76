package ledger_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/custody-dev/custody/ledger"
)

// TestEncodeRow: the row encoder writes what json.Marshal writes, byte for byte, for rows with
// every pointer set or nil, numbers of every size (exponent forms included) and strings with
// every kind of byte json.Marshal escapes, and refuses what it refuses.
func TestEncodeRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		r := randomRow(rng)
		want, wantErr := json.Marshal(r)
		got, err := ledger.EncodeRow(r)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("row %d: error %v, json.Marshal's %v", i, err, wantErr)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Fatalf("row %d differs from json.Marshal (-want +got):\n%s", i, diff)
		}
	}
}

// intSpan is the range of the rows' random ints: 2^40, or all of int where int is 32 bits.
const intSpan = min(1<<40, math.MaxInt)

func randomRow(rng *rand.Rand) ledger.Row {
	maybe := func() bool { return rng.IntN(3) == 0 }
	intp := func() *int {
		if maybe() {
			return nil
		}
		v := rng.IntN(intSpan) - intSpan/2
		return &v
	}
	uintp := func() *uint64 {
		if maybe() {
			return nil
		}
		v := rng.Uint64() >> rng.IntN(64)
		return &v
	}
	floatv := func() float64 {
		switch rng.IntN(8) {
		case 0:
			return 0
		case 1:
			return math.Copysign(0, -1)
		case 2:
			return rng.Float64() * math.Pow(10, float64(rng.IntN(60)-30))
		case 3:
			return -rng.Float64() * 1e-7
		case 4:
			return 1e21 + rng.Float64()*1e22
		case 5:
			if rng.IntN(50) == 0 {
				return math.NaN()
			}
			return math.Inf(1 - 2*rng.IntN(2))
		}
		return 1.7e9 + rng.Float64()*1e6 // a time in seconds, as rows hold
	}
	floatp := func() *float64 {
		if maybe() {
			return nil
		}
		v := floatv()
		return &v
	}
	alphabet := []string{"a", "Z", "0", " ", "/", "-", "_", "\"", "\\", "<", ">", "&", "\n", "\t", "\x01", "\x7f", "é", "\u2028", "\u2029", "\xff", "日本", "\U0001F600"}
	str := func() string {
		if maybe() {
			return ""
		}
		var s string
		for range rng.IntN(12) {
			if rng.IntN(4) == 0 {
				s += alphabet[rng.IntN(len(alphabet))]
			} else {
				s += alphabet[rng.IntN(6)]
			}
		}
		return s
	}
	boolp := func() *bool {
		if maybe() {
			return nil
		}
		v := rng.IntN(2) == 0
		return &v
	}
	var bootID *string
	if !maybe() {
		s := str()
		bootID = &s
	}
	return ledger.Row{
		PID: rng.IntN(1 << 22), CreateTime: floatp(), Purpose: str(), Install: str(),
		SpawnerPID: intp(), SpawnerCreate: floatp(), RegisteredAt: floatv(), Argv: str(), Host: str(),
		Port: intp(), Profile: str(), HermesHome: str(), Isolated: rng.IntN(2) == 0,
		BootStart: floatp(), SpawnerBoot: floatp(), BootID: bootID,
		StartTicks: uintp(), SpawnerStartTicks: uintp(), PidfdID: uintp(), SpawnerPidfdID: uintp(),
		PGID: intp(), Scope: str(), Reapable: boolp(), Generation: intp(), Owner: intp(),
		Containment: str(), Cgroup: str(), CgroupID: uintp(), CgroupVia: str(),
	}
}
