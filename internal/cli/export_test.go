package cli

import (
	"io"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
)

// FormatVersion is formatVersion, for tests of what a build's information prints as.
var FormatVersion = formatVersion

// RunOwner returns the owner custody run and custody adopt make for --grace grace, recording in
// l.
func RunOwner(l *ledger.Ledger, grace time.Duration) *custody.Owner {
	return (&globals{stderr: io.Discard}).newOwner(l, "", "run", grace, nil)
}
