package custody_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/stop"
)

// BenchmarkTransfer hands one live child back and forth between two owners of this process. A
// transfer is timed from Child.Grant to the giver's Grant.Wait returning transferred: the
// receiver's redemption (pipe, the peers' tokens, the job handle duplicated into it and proven,
// the process handle's proof, the receipt in the ledger) and the giver's check of the receipt and
// release. Its floor, timed alternately in the same loop, is one write of the same ledger, the
// dearest step a transfer cannot skip. It reports the medians and their ratio.
func BenchmarkTransfer(b *testing.B) {
	led := ledger.Open(filepath.Join(testproc.TempDir(b), "spawn-ledger.json"))
	owners := [2]*custody.Owner{{Ledger: led}, {Ledger: led}}
	ctx := context.Background()
	cmd := testproc.Helper(b, "worker")
	floor, transfer, c := timeTransfers(b, led, owners, cmd)
	c.Stop(ctx, stop.Options{})
	slices.Sort(floor)
	slices.Sort(transfer)
	f, x := floor[len(floor)/2], transfer[len(transfer)/2]
	b.ReportMetric(float64(f)/1e6, "ledger-write-p50-ms")
	b.ReportMetric(float64(x)/1e6, "transfer-p50-ms")
	b.ReportMetric(float64(x)/float64(f), "transfer/ledger-write")
	b.ReportMetric(float64(transfer[len(transfer)*9/10])/1e6, "transfer-p90-ms")
}
