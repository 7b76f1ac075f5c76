//go:build unix

package cli_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// BenchmarkPsJSONProcess runs `custody ps --all --json` as a whole process over 1,000 rows of
// distinct live processes: start-up, read, 1,000 proofs, output. The process is this test binary
// re-executed as custody, whose start-up is a little heavier than the real binary's.
func BenchmarkPsJSONProcess(b *testing.B) {
	led := b.TempDir() + "/spawn-ledger.json"
	self, _ := procid.Self()
	var rows []ledger.Row
	for range 1000 {
		c := exec.Command("cat")
		if _, err := c.StdinPipe(); err != nil {
			b.Fatal(err)
		}
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Process.Kill(); c.Wait() })
		inc, err := procid.Read(c.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		rows = append(rows, ledger.NewRow(inc, self))
	}
	if _, err := ledger.Open(led).Update(context.Background(), nil, func([]ledger.Row) ([]ledger.Row, error) { return rows, nil }); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cmd := testproc.Helper(b, "custody", "--ledger", led, "ps", "--all", "--json")
		if out, err := cmd.Output(); err != nil || len(out) < 1000*300 {
			b.Fatalf("ps --json: %v, %d bytes", err, len(out))
		}
	}
}
