//go:build unix

package cli_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

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
		inc, err := procid.ReadExact(c.Process.Pid) // the rows custody writes: with pidfs ids
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
// distinct live processes that custody wrote (start-up, read, 1,000 proofs, output), and, in the
// same iteration so that a machine loaded by others weighs on all alike: the same command over an
// empty ledger (start-up and nothing else), the bare /proc/PID/stat loop over the same PIDs and,
// on Linux, the bare pidfd loop (the floors of a proof by start ticks and by pidfs id, on one
// thread). marginal is the median of the per-iteration differences between the two processes:
// what the 1,000 rows cost. Each figure is given as wall time (-ms) and as CPU time (-cpu-ms,
// user and system, of the process or of the floor's thread), which a loaded machine inflates far
// less. The process is this test binary re-executed as custody, whose start-up is a little
// heavier than the real binary's; the difference cancels it.
func BenchmarkPsJSONProcess(b *testing.B) {
	led := liveLedger(b, 1000)
	empty := b.TempDir() + "/spawn-ledger.json"
	if err := os.WriteFile(empty, []byte("[]"), 0o600); err != nil {
		b.Fatal(err)
	}
	rows, err := ledger.Open(led).Rows(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	ps := func(led string, min int) (wall, cpu time.Duration) {
		cmd := testproc.Helper(b, "custody", "--ledger", led, "ps", "--all", "--json")
		t0 := time.Now()
		out, err := cmd.Output()
		wall = time.Since(t0)
		if err != nil || len(out) < min {
			b.Fatalf("ps --json: %v, %d bytes", err, len(out))
		}
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	floor := func(probe func(pid int) error) (wall, cpu time.Duration) {
		return timeThread(b, func() {
			for _, r := range rows {
				if err := probe(r.PID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	statProbe := func(pid int) error { _, err := procid.Read(pid); return err }
	var m [2]map[string][]time.Duration // wall, cpu
	m[0], m[1] = map[string][]time.Duration{}, map[string][]time.Duration{}
	add := func(name string, wall, cpu time.Duration) {
		m[0][name], m[1][name] = append(m[0][name], wall), append(m[1][name], cpu)
	}
	for b.Loop() {
		fw, fc := ps(led, 1000*300)
		ew, ec := ps(empty, 2)
		add("ps-1000", fw, fc)
		add("ps-empty", ew, ec)
		add("marginal", fw-ew, fc-ec)
		sw, sc := floor(statProbe)
		add("stat-floor", sw, sc)
		if procid.PidfsError() == nil {
			pw, pc := floor(testproc.PidfdProbe)
			add("pidfd-floor", pw, pc)
		}
	}
	b.ReportMetric(0, "ns/op")
	for name := range m[0] {
		b.ReportMetric(median(m[0][name]), name+"-ms")
		b.ReportMetric(median(m[1][name]), name+"-cpu-ms")
	}
}

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / 1e6
}
