//go:build unix

package ledger_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// liveLedger returns a ledger holding n rows of distinct live processes, and one more live process
// whose row the benchmark appends.
func liveLedger(b *testing.B, n int) (*ledger.Ledger, procid.Incarnation) {
	b.Helper()
	l := ledger.Open(b.TempDir() + "/spawn-ledger.json")
	var rows []ledger.Row
	self, _ := procid.Self()
	var last procid.Incarnation
	for i := range n + 1 {
		// A plain start, not testproc's: a thousand logged children would leave this process a
		// heap that the collector, not the ledger, would then dominate.
		p := exec.Command("cat")
		if _, err := p.StdinPipe(); err != nil {
			b.Fatal(err)
		}
		if err := p.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Process.Kill(); p.Wait() })
		inc, err := procid.ReadExact(p.Process.Pid) // the rows custody writes: with pidfs ids
		if err != nil {
			b.Fatal(err)
		}
		if i == n {
			last = inc
			break
		}
		r := ledger.NewRow(inc, self)
		r.Purpose = "serve"
		rows = append(rows, r)
	}
	if _, err := l.Update(context.Background(), nil, func([]ledger.Row) ([]ledger.Row, error) { return rows, nil }); err != nil {
		b.Fatal(err)
	}
	return l, last
}

// BenchmarkAppend registers one more process in a ledger of n live rows (the appended PID replaces
// its own row each time, so the ledger stays at n+1 rows). handle=fresh opens a new handle for
// each write, as a process that writes once does (custody register): it reads and parses the
// file. handle=kept writes through one handle, as an owner does: while nobody else writes, it
// starts from the rows it wrote last (see Ledger).
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{0, 100, 1000} {
		for _, fresh := range []bool{true, false} {
			name := "rows=" + strconv.Itoa(n) + "/handle=kept"
			if fresh {
				name = "rows=" + strconv.Itoa(n) + "/handle=fresh"
			}
			b.Run(name, func(b *testing.B) {
				l, inc := liveLedger(b, n)
				self, _ := procid.Self()
				row := ledger.NewRow(inc, self)
				ctx := context.Background()
				for b.Loop() {
					if fresh {
						l.Close()
						l = ledger.Open(l.Path())
					}
					if _, err := l.Add(ctx, row); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkVerifiedRead reads 1,000 live rows custody wrote and proves each one's identity.
// Every iteration also times, side by side so that a machine loaded by others weighs on all
// alike: the read alone (no proof), the bare /proc/PID/stat loop over the same PIDs (the floor
// of a proof by start ticks), and on Linux the bare pidfd loop (pidfd_open, fstat, poll, close:
// the floor of a proof by pidfs id). The floors run on one CPU; the verified read spreads its
// proofs over all. Each figure is reported as the median over the iterations, in ms.
func BenchmarkVerifiedRead(b *testing.B) {
	l, _ := liveLedger(b, 1000)
	ctx := context.Background()
	rows, _ := l.Rows(ctx)
	var verified, read, stat, pidfd []time.Duration
	timed := func(d *[]time.Duration, fn func()) {
		t0 := time.Now()
		fn()
		*d = append(*d, time.Since(t0))
	}
	for b.Loop() {
		timed(&verified, func() {
			if es, err := l.Query(ctx, ledger.Query{Verified: true}); err != nil || len(es) != 1000 {
				b.Fatalf("%d rows, %v", len(es), err)
			}
		})
		timed(&read, func() {
			if _, err := l.Rows(ctx); err != nil {
				b.Fatal(err)
			}
		})
		timed(&stat, func() {
			for _, r := range rows {
				if _, err := procid.Read(r.PID); err != nil {
					b.Fatal(err)
				}
			}
		})
		if procid.PidfsError() == nil {
			timed(&pidfd, func() {
				for _, r := range rows {
					if err := testproc.PidfdProbe(r.PID); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(verified), "verified-ms")
	b.ReportMetric(median(read), "read-only-ms")
	b.ReportMetric(median(stat), "stat-floor-ms")
	if len(pidfd) > 0 {
		b.ReportMetric(median(pidfd), "pidfd-floor-ms")
	}
}

// BenchmarkTrust is the check every read and write makes first (Ledger.Trust): lstat of each
// directory from the root down and of the ledger and its lock. Beside it, the floor: one lstat.
func BenchmarkTrust(b *testing.B) {
	l, inc := liveLedger(b, 0)
	self, _ := procid.Self()
	if _, err := l.Add(context.Background(), ledger.NewRow(inc, self)); err != nil {
		b.Fatal(err)
	}
	b.Run("trust", func(b *testing.B) {
		for b.Loop() {
			if err := l.Trust(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lstat-floor", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.Lstat(l.Path()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / 1e6
}
