//go:build unix

package ledger_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/custody-dev/custody/ledger"
)

// A ledger path that names a directory is refused in words, not with the masked mode
// "d---------", which reads as permissions the directory does not have.
func TestLedgerIsADirectory(t *testing.T) {
	l := tempLedger(t)
	if err := os.MkdirAll(l.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := l.Rows(context.Background())
	if !errors.Is(err, ledger.ErrUntrusted) || !strings.Contains(err.Error(), "a directory") || strings.Contains(err.Error(), "---") {
		t.Errorf("Rows of a directory: %v; want it refused as a directory", err)
	}
}
