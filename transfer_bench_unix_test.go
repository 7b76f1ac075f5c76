//go:build linux || darwin

package custody_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
)

// BenchmarkTransfer hands one live child back and forth between two owners of this process, each
// with a warm supervisor, in a ledger of 100 live rows. A transfer is timed from Child.Grant to
// the giver's Grant.Wait returning transferred: the receiver's redemption (socket, proof through
// a pidfd, receipt in the ledger, cover) and the giver's check of the receipt and release. Its
// floor, timed alternately in the same loop, is one ledger write of the same ledger (a rewrite
// of its rows under the lock), the dearest step a transfer cannot skip. It reports the medians
// and transfer/ledger-write, their ratio.
func BenchmarkTransfer(b *testing.B) {
	led := ledger.Open(b.TempDir() + "/spawn-ledger.json")
	fill(b, led, 100)
	var owners [2]*custody.Owner
	for i := range owners {
		sup := &supervise.Client{IdleGrace: -1}
		b.Cleanup(func() { sup.Close() })
		if err := sup.Start(); err != nil {
			b.Fatal(err)
		}
		owners[i] = &custody.Owner{Ledger: led, Supervisor: sup}
	}
	ctx := context.Background()
	cmd := exec.Command("cat")
	floor, transfer, c := timeTransfers(b, led, owners, cmd)
	c.Stop(ctx, stop.Options{Grace: time.Second})
	f, x := median(floor), median(transfer)
	b.ReportMetric(float64(f)/1e6, "ledger-write-p50-ms")
	b.ReportMetric(float64(x)/1e6, "transfer-p50-ms")
	b.ReportMetric(float64(x)/float64(f), "transfer/ledger-write")
	b.ReportMetric(float64(transfer[len(transfer)*9/10])/1e6, "transfer-p90-ms") // sorted by median
	b.ReportMetric(float64(mean(transfer))/1e6, "transfer-mean-ms")
}
