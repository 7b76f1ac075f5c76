//go:build linux || darwin

package ledger_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// A program records a process it started (as custody register does), then reads the ledger
// back with each row's liveness judged now. Liveness is three-valued: a row that cannot be
// proven dead is kept, and only a row proven alive licenses anything.
func ExampleLedger_Query() {
	dir, err := os.MkdirTemp("", "ledger-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l := ledger.Open(filepath.Join(dir, "spawn-ledger.json")) // ledger.Resolve("") names the user's
	defer l.Close()
	ctx := context.Background()

	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	inc, err := procid.ReadExact(cmd.Process.Pid)
	if err != nil {
		log.Fatal(err)
	}
	self, err := procid.Self()
	if err != nil {
		log.Fatal(err)
	}
	row := ledger.NewChildRow(inc, self, cmd.Args)
	row.Purpose = "serve"
	if _, err := l.Add(ctx, row); err != nil {
		log.Fatal(err)
	}

	entries, err := l.Query(ctx, ledger.Query{Verified: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		r := e.Decoded() // a query decodes only the fields it judges by
		fmt.Printf("%s %q: %s, spawner %s\n", r.Purpose, r.Argv, e.State, e.SpawnerState)
	}

	cmd.Process.Kill()
	cmd.Wait()
	entries, err = l.Query(ctx, ledger.Query{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows not proven dead:", len(entries))
	// Output:
	// serve "sleep 60": alive, spawner alive
	// rows not proven dead: 0
}
