//go:build !linux

package ledger

import (
	"errors"
	"os"
)

// makeSpare is unsupported here: without O_TMPFILE a file made ahead would need a name, which
// another writer could take for a dead writer's (see removeStaleTemps).
func makeSpare(string) (*os.File, error) { return nil, spareError("make", errors.ErrUnsupported) }

func nameSpare(*os.File, string) (*os.File, error) {
	return nil, spareError("name", errors.ErrUnsupported)
}
