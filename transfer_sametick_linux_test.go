package custody_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testid"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

func init() {
	testproc.Register("pidns-transfer-same-tick", testid.InPIDNamespace(testid.Case{Name: "result", Run: transferSameTick}))
}

// TestTransferSameTick: in a PID namespace, a child A dies and a stranger B takes its PID within
// the tick A started in (asserted), and the ledger's row for the PID is B's, owned by a receiver.
// A giver that hands A over must not read B's row as the receipt for A, nor a receiver write its
// receipt onto B's row: by PID and start ticks alone both would, and the transfer would take the
// stranger for the child. The pidfs ids, which both sides carry, tell them apart.
func TestTransferSameTick(t *testing.T) {
	testid.RunInPIDNamespace(t, "pidns-transfer-same-tick", []string{"result"}, filepath.Join(t.TempDir(), "spawn-ledger.json"))
}

func transferSameTick(args []string) (string, error) {
	ctx := context.Background()
	self, err := procid.Self()
	if err != nil {
		return "", err
	}
	s, err := testid.NewSameTick(500, nil)
	if err != nil {
		return "", err
	}
	defer s.End()
	const receiver = 4242
	row := ledger.NewRow(s.Stranger, self)
	row.Owner = &[]int{receiver}[0]
	l := ledger.Open(args[0])
	if _, err := l.Add(ctx, row); err != nil {
		return "", err
	}
	if err := custody.FindReceipt(ctx, l, s.Victim.ID, receiver); err == nil {
		return "", errors.New("the giver read the stranger's row as the receipt for its child")
	}
	if err := custody.Receipt(ctx, l, s.Victim.ID, self); !errors.Is(err, ledger.ErrNotRegistered) {
		return "", errors.New("the receiver wrote its receipt onto the stranger's row: " + errString(err))
	}
	// The witness: the same check finds the stranger's own incarnation.
	if err := custody.FindReceipt(ctx, l, s.Stranger.ID, receiver); err != nil {
		return "", err
	}
	return s.String(), s.Lives()
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
