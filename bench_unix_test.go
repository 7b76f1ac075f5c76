//go:build unix

package custody_test

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

// BenchmarkStart compares an owned start of /bin/true — its ledger row written into a ledger of
// 100 live rows, its group covered by a warm supervisor — with a plain exec.Cmd.Start of the same
// program with Setpgid, side by side. Only the starts are timed: reaping each process, and for the
// owned one its release (the row dropped, the group uncovered, which keeps the ledger at 100
// rows), run with the timer stopped.
func BenchmarkStart(b *testing.B) {
	var plain, owned time.Duration
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cmd.Wait()
			b.StartTimer()
		}
		plain = b.Elapsed() / time.Duration(b.N) // Elapsed excludes stopped time
	})
	b.Run("owned", func(b *testing.B) {
		led := ledger.Open(b.TempDir() + "/spawn-ledger.json")
		fill(b, led, 100)
		sup := &supervise.Client{IdleGrace: -1}
		defer sup.Close()
		o := &custody.Owner{Ledger: led, Supervisor: sup}
		if err := sup.Start(); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		for b.Loop() {
			c, err := o.Start(ctx, exec.Command("/bin/true"), custody.StartOptions{Purpose: "serve"})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			c.Wait()
			if err := c.Release(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		owned = b.Elapsed() / time.Duration(b.N)
	})
	if plain > 0 && owned > 0 {
		fmt.Printf("owned start / plain start = %.2f\n", float64(owned)/float64(plain))
	}
}

// fill writes n rows of live processes (cats that live until the benchmark ends).
func fill(b *testing.B, l *ledger.Ledger, n int) {
	self, _ := procid.Self()
	var rows []ledger.Row
	for range n {
		c := exec.Command("cat")
		c.StdinPipe()
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Process.Kill(); c.Wait() })
		inc, _ := procid.Read(c.Process.Pid)
		rows = append(rows, ledger.NewRow(inc, self))
	}
	if _, err := l.Update(context.Background(), nil, func([]ledger.Row) ([]ledger.Row, error) { return rows, nil }); err != nil {
		b.Fatal(err)
	}
}
