package ledger_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// TestPidfdIDBadInput: a pidfd_id that is not a positive integer is no id. The row then stands on
// its start ticks: with the live start it is alive, with another it is dead, and never does the
// bad id make it match.
func TestPidfdIDBadInput(t *testing.T) {
	if err := procid.PidfsError(); err != nil {
		testproc.Skip(t, "skipping: pidfs ids unavailable: %v", err)
	}
	c := testproc.Start(t, exec.Command("cat"))
	inc, err := procid.ReadExact(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`0`, `-1`, `-9223372036854775808`, `1.5`, `"` + fmt.Sprint(inc.PidfdID) + `"`,
		`null`, `true`, `[]`, `{}`, `18446744073709551616`} {
		for _, ticks := range []uint64{inc.Start, inc.Start + 1} {
			raw := fmt.Sprintf(`{"pid":%d,"boot_id":%q,"start_ticks":%d,"pidfd_id":%s,"spawner_pid":%d,"spawner_pidfd_id":%s}`,
				inc.PID, inc.BootID, ticks, bad, inc.PID, bad)
			r := readOne(t, raw)
			if r.PidfdID != nil || r.SpawnerPidfdID != nil {
				t.Errorf("pidfd_id %s: decoded as %v, %v; want none", bad, r.PidfdID, r.SpawnerPidfdID)
			}
			want := procid.Dead
			if ticks == inc.Start {
				want = procid.Alive
			}
			if s, _ := r.Record().Check(true); s != want {
				t.Errorf("pidfd_id %s, start ticks %d (live %d): %v, want %v", bad, ticks, inc.Start, s, want)
			}
		}
	}
	// The good id, for contrast: it decides over equal start ticks.
	for _, id := range []uint64{inc.PidfdID, inc.PidfdID + 1} {
		raw := fmt.Sprintf(`{"pid":%d,"boot_id":%q,"start_ticks":%d,"pidfd_id":%d}`, inc.PID, inc.BootID, inc.Start, id)
		r := readOne(t, raw)
		if r.PidfdID == nil || *r.PidfdID != id {
			t.Fatalf("pidfd_id %d: decoded as %v", id, r.PidfdID)
		}
		want := procid.Dead
		if id == inc.PidfdID {
			want = procid.Alive
		}
		if s, _ := r.Record().Check(true); s != want {
			t.Errorf("pidfd_id %d (live %d), equal start ticks: %v, want %v", id, inc.PidfdID, s, want)
		}
	}
}

// readOne reads a ledger file holding the one row raw, as every verb reads it.
func readOne(t *testing.T, raw string) ledger.Row {
	t.Helper()
	led := filepath.Join(t.TempDir(), "spawn-ledger.json")
	if err := os.WriteFile(led, []byte("["+raw+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	rows, err := ledger.Open(led).Rows(t.Context())
	if err != nil || len(rows) != 1 {
		t.Fatalf("%s: %d rows, %v", raw, len(rows), err)
	}
	return rows[0]
}
