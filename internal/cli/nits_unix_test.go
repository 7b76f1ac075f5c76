//go:build linux || darwin

package cli_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/custody-dev/custody"
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

// TestDefaultPurpose: custody run without --purpose stamps the API's default purpose, one default
// for the library and the command line.
func TestDefaultPurpose(t *testing.T) {
	r := runCLI(t, "--ledger", ledgerPath(t), "run", "--", "sh", "-c", `echo "$CUSTODY_SPAWN"`)
	f := strings.Split(strings.TrimSpace(r.stdout), ":")
	if r.code != 0 || len(f) != 5 || f[2] != custody.DefaultPurpose {
		t.Errorf("custody run's tag %q (exit %d, %q), want purpose %q", r.stdout, r.code, r.stderr, custody.DefaultPurpose)
	}
}

// TestNoStutter: an error the library wraps says custody once.
func TestNoStutter(t *testing.T) {
	led := ledgerPath(t)
	r := runCLI(t, "--ledger", led, "adopt", "custody-grant-v1:eyJzb2Nr")
	checkOneLineError(t, "adopt of a malformed grant", r, 1)
	if n := strings.Count(r.stderr, "custody:"); n != 1 {
		t.Errorf("stderr %q says custody: %d times, want once", r.stderr, n)
	}
}

// TestPsAlignsWideText: a purpose in Chinese (two terminal columns a character) keeps the later
// columns of its row in line with the header's and the other rows'.
func TestPsAlignsWideText(t *testing.T) {
	led := ledgerPath(t)
	for _, purpose := range []string{"服务器", "serve"} {
		if r := runCLI(t, "--ledger", led, "register", "--pid", strconv.Itoa(cat(t)), "--purpose", purpose); r.code != 0 {
			t.Fatalf("register: %+v", r)
		}
	}
	r := runCLI(t, "--ledger", led, "ps")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 {
		t.Fatalf("ps: %+v", r)
	}
	// The terminal column where INSTALL starts on each line.
	install := slices.Index(strings.Fields(lines[0]), "INSTALL") + 1
	col := func(line string) int {
		fields, at, in := 0, 0, false
		for _, c := range line {
			if c != ' ' && !in {
				if fields++; fields == install {
					return at
				}
			}
			in = c != ' '
			if unicode.Is(unicode.Han, c) {
				at += 2
			} else {
				at++
			}
		}
		return -1
	}
	want := col(lines[0])
	for _, l := range lines[1:] {
		if got := col(l); got != want {
			t.Errorf("INSTALL starts at column %d in %q, at %d in the header:\n%s", got, l, want, r.stdout)
		}
	}
}
