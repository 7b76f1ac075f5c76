// Package testid parses the incarnations helper processes report in tests: "<pid> <start>"
// pairs, as in "ready 4242 123456 4243 123460". It stands apart from testproc because procid's
// own tests use testproc, and testproc importing procid would make an import cycle.
package testid

import (
	"errors"
	"strconv"
	"testing"

	"github.com/custody-dev/custody/procid"
)

// Parse reads fields as pairs of PID and start, failing the test on anything else.
func Parse(tb testing.TB, fields []string) []procid.ID {
	tb.Helper()
	if len(fields) == 0 || len(fields)%2 != 0 {
		tb.Fatalf("incarnations %q: want pairs of pid and start", fields)
	}
	var ids []procid.ID
	for i := 0; i < len(fields); i += 2 {
		pid, err1 := strconv.Atoi(fields[i])
		start, err2 := strconv.ParseUint(fields[i+1], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			tb.Fatalf("incarnations %q: %v", fields, err)
		}
		ids = append(ids, procid.ID{PID: pid, Start: start})
	}
	return ids
}
