//go:build unix

package ledger_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

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
		inc, err := procid.Read(p.Process.Pid)
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

// BenchmarkVerifiedRead reads 1,000 live rows and proves each one's identity; the stat-floor
// sub-benchmark reads the same rows' /proc/PID/stat files in a loop, the bare cost of any proof.
func BenchmarkVerifiedRead(b *testing.B) {
	l, _ := liveLedger(b, 1000)
	ctx := context.Background()
	rows, _ := l.Rows(ctx)
	var verified, floor time.Duration
	b.Run("verified", func(b *testing.B) {
		for b.Loop() {
			es, err := l.Query(ctx, ledger.Query{Verified: true})
			if err != nil || len(es) != 1000 {
				b.Fatalf("%d rows, %v", len(es), err)
			}
		}
		verified = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("stat-floor", func(b *testing.B) {
		for b.Loop() {
			for _, r := range rows {
				if _, err := procid.Read(r.PID); err != nil {
					b.Fatal(err)
				}
			}
		}
		floor = b.Elapsed() / time.Duration(b.N)
	})
	if floor > 0 {
		fmt.Printf("verified read / stat floor = %.2f\n", float64(verified)/float64(floor))
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
