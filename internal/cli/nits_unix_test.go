//go:build linux || darwin

package cli_test

import (
	"os"
	"testing"
)

// TestEmptyAndOutOfRangeValues: an empty --ledger, --tag-env or --grant-env is bad input, not the
// default; a supervisor's owner group beyond pid_t is bad input. One line, exit 2, no ledger.
func TestEmptyAndOutOfRangeValues(t *testing.T) {
	led := ledgerPath(t)
	for _, tc := range []struct {
		desc string
		args []string
	}{
		{"empty --ledger", []string{"--ledger", "", "ps"}},
		{"empty --tag-env", []string{"--ledger", led, "--tag-env", "", "run", "--", "true"}},
		{"empty --grant-env", []string{"--ledger", led, "run", "--grant-env", "", "--", "true"}},
		{"supervise beyond pid_t", []string{"supervise", "99999999999999"}},
		{"supervise --owner-pgid beyond pid_t", []string{"supervise", "--owner-pgid", "4294967296"}},
	} {
		checkOneLineError(t, tc.desc, runCLI(t, tc.args...), 2)
	}
	if _, err := os.Stat(led); !os.IsNotExist(err) {
		t.Errorf("bad input created the ledger: %v", err)
	}
}
