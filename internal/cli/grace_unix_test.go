//go:build unix

package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/cli"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
)

// TestRunOwnerCloseGrace: the owner custody run and custody adopt act as stops what its final
// stop left with --grace, not the default. Its child takes longer than the default grace to shut
// down after SIGTERM, and says so in a file once done: with a --grace longer than that, Close
// (which ends what a failed final stop left) lets it finish; with the default it would be killed
// first, and the file would not be there.
func TestRunOwnerCloseGrace(t *testing.T) {
	dir := t.TempDir()
	done := filepath.Join(dir, "done")
	owner := cli.RunOwner(ledger.Open(filepath.Join(dir, "spawn-ledger.json")), time.Minute)
	t.Cleanup(func() { owner.Close(); owner.Supervisor.Close() })
	ready := filepath.Join(dir, "ready")
	// The trap runs once the sleep in the loop ends; its own sleep starts after the SIGTERM, which
	// does not reach it.
	cmd := exec.Command("sh", "-c", `trap 'sleep 4; : > "$DONE"; exit 0' TERM; : > "$READY"; while :; do sleep 0.1; done`)
	cmd.Env = append(os.Environ(), "DONE="+done, "READY="+ready)
	if _, err := owner.Start(context.Background(), cmd, custody.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	testproc.WaitFor(t, 10*time.Second, func() error { _, err := os.Stat(ready); return err })
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(done); err != nil {
		t.Fatalf("the child did not finish its shutdown within --grace: Close stopped it with another grace: %v", err)
	}
}
