package custody_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
)

// timeTransfers starts cmd under owners[0] and then, once per benchmark iteration, times one write
// of led (the floor) and one transfer of the child to the other owner, alternately in one loop so
// that both see the same machine. It returns both timings and the child as its last owner holds it.
func timeTransfers(b *testing.B, led *ledger.Ledger, owners [2]*custody.Owner, cmd *exec.Cmd) (floor, transfer []time.Duration, c *custody.Child) {
	ctx := context.Background()
	cmd.StdinPipe() // its lifeline: it ends with the benchmark
	c, err := owners[0].Start(ctx, cmd, custody.StartOptions{Purpose: "serve"})
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		t := time.Now()
		if _, err := led.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) { return rows, nil }); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(t))

		t = time.Now()
		g, err := c.Grant(custody.GrantOptions{})
		if err != nil {
			b.Fatal(err)
		}
		next, err := owners[(i+1)%2].Adopt(ctx, g.String())
		if err != nil {
			b.Fatal(err)
		}
		if res, _ := g.Wait(ctx); res.Outcome != custody.Transferred {
			b.Fatalf("transfer %d: %+v", i, res)
		}
		transfer = append(transfer, time.Since(t))
		c, i = next, i+1
	}
	b.StopTimer()
	return floor, transfer, c
}
