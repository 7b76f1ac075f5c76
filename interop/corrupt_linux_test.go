package interop_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/custody-dev/custody/ledger"
)

// TestCorruptAgreement: custody and the Hermes reader agree on every file: one both read, one
// both find corrupt (custody's writer quarantines it, as Hermes's does), and one neither can read
// (nested too deep for Python's recursion: Hermes fails with RecursionError and moves nothing;
// custody refuses it as unreadable and leaves it in place, neither quarantined nor read as an
// empty roster).
func TestCorruptAgreement(t *testing.T) {
	h := newHermes(t)
	nested := func(n int, open, close string) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	for _, tc := range []struct {
		desc, body string
	}{
		{"empty array", "[]"},
		{"scalars", "[1, \"x\", null]"},
		{"NaN", "[NaN]"},
		{"100 deep", nested(100, "[", "]")},
		{"1,000 deep", nested(1000, "[", "]")},
		{"10,000 deep", nested(10000, "[", "]")},
		{"10,002 deep", nested(10002, "[", "]")},
		{"10,002 deep objects", "[" + nested(10001, `{"a":`, "}")[:10001*5] + "1" + strings.Repeat("}", 10001) + "]"},
		{"deep inside a row", `[{"pid": 5, "x": ` + nested(2000, "[", "]") + `}]`},
		{"not JSON", "not json"},
		{"an object", `{"pid": 5}`},
		{"truncated", `[{"pid": 5`},
		{"deep and truncated", nested(2000, "[", "]")[:3000]},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			path := h.ledger()
			os.Remove(path + ".corrupt")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			peer := strings.TrimSpace(h.run(`
try:
    r = pi._read_ledger(Path(sys.argv[1]))
    print("corrupt" if r is None else "read")
except RecursionError:
    print("unreadable")
`, path))
			var got string
			rep, err := ledger.Open(path).Update(context.Background(), nil, func(rows []ledger.Row) ([]ledger.Row, error) { return rows, nil })
			switch {
			case errors.Is(err, ledger.ErrTooDeep):
				got = "unreadable"
				if b, _ := os.ReadFile(path); !bytes.Equal(b, []byte(tc.body)) {
					t.Errorf("custody changed a file it refused as unreadable")
				}
				if _, err := os.Stat(path + ".corrupt"); err == nil {
					t.Errorf("custody quarantined a file it refused as unreadable")
				}
			case err != nil:
				t.Fatalf("custody: %v", err)
			case rep.Quarantined != nil:
				got = "corrupt"
			default:
				got = "read"
			}
			if got != peer {
				t.Errorf("Hermes's reader: %s; custody: %s (%v)", peer, got, err)
			}
		})
	}
}
