//go:build linux || darwin

package supervise

import (
	"io"
	"log/slog"
	"testing"
)

// The scope id travels on its own line after the register line, which a Hermes supervisor
// ignores; custody's supervisor takes well-formed ones only.
func TestEnvIDLine(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	got := string(registerLine(nil, Group{PID: 42, PGID: 42, Start: 7, ScopeID: id}))
	if want := "register 42 42 7\nenvid 42 " + id + "\n"; got != want {
		t.Fatalf("registerLine = %q, want %q", got, want)
	}
	if got := string(registerLine(nil, Group{PID: 42, PGID: 42, Start: 7})); got != "register 42 42 7\n" {
		t.Fatalf("registerLine without a scope id = %q", got)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var e envSweep
	for _, c := range []struct {
		line  string
		taken bool // an envid line, well-formed or not
		pgid  int  // recorded, or 0
	}{
		{"envid 42 " + id, true, 42},
		{"envid 1 " + id, true, 0},
		{"envid -5 " + id, true, 0},
		{"envid 42 " + id + " extra", true, 0},
		{"envid 42 " + id[:31], true, 0},
		{"envid 42", true, 0},
		{"envid 4294967338 " + id, true, 0}, // 2^32+42: pid_t is 32-bit
		{"register 42 42 7", false, 0},
		{"envidx 42 " + id, false, 0},
	} {
		e.ids = nil
		if taken := e.line([]byte(c.line), log); taken != c.taken {
			t.Errorf("line(%q) taken = %v", c.line, taken)
		}
		if got, ok := e.ids[c.pgid]; (c.pgid != 0) != ok || (ok && got != id) || (c.pgid == 0 && len(e.ids) != 0) {
			t.Errorf("line(%q): ids %v", c.line, e.ids)
		}
	}
	e.ids = map[int]string{42: id}
	e.forget(42)
	if e.any() {
		t.Errorf("forget left %v", e.ids)
	}
}
