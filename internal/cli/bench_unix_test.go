//go:build unix

package cli_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// liveLedger writes a ledger of n rows of distinct live processes spawned by this process, which
// lives throughout: none of them may be reaped.
func liveLedger(b *testing.B, n int) string {
	led := b.TempDir() + "/spawn-ledger.json"
	self, _ := procid.Self()
	var rows []ledger.Row
	for range n {
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
		r := ledger.NewRow(inc, self)
		r.Purpose = "serve"
		rows = append(rows, r)
	}
	if _, err := ledger.Open(led).Update(context.Background(), nil, func([]ledger.Row) ([]ledger.Row, error) { return rows, nil }); err != nil {
		b.Fatal(err)
	}
	return led
}

// BenchmarkReapProcess runs `custody reap --all` as a whole process over 1,000 rows of which none
// may be reaped (their spawner, this process, lives): start-up, read, 2,000 judgements, output.
func BenchmarkReapProcess(b *testing.B) {
	led := liveLedger(b, 1000)
	for b.Loop() {
		cmd := testproc.Helper(b, "custody", "--ledger", led, "reap", "--all")
		if out, err := cmd.Output(); err != nil || strings.Count(string(out), "spawner-alive") != 1000 {
			b.Fatalf("reap: %v, %d bytes", err, len(out))
		}
	}
}

// BenchmarkPsJSONProcess runs `custody ps --all --json` as a whole process over 1,000 rows of
// distinct live processes: start-up, read, 1,000 proofs, output. The process is this test binary
// re-executed as custody, whose start-up is a little heavier than the real binary's.
func BenchmarkPsJSONProcess(b *testing.B) {
	led := liveLedger(b, 1000)
	for b.Loop() {
		cmd := testproc.Helper(b, "custody", "--ledger", led, "ps", "--all", "--json")
		if out, err := cmd.Output(); err != nil || len(out) < 1000*300 {
			b.Fatalf("ps --json: %v, %d bytes", err, len(out))
		}
	}
}
