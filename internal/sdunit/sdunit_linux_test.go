package sdunit

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
)

// The session bus is $DBUS_SESSION_BUS_ADDRESS, else the socket $XDG_RUNTIME_DIR/bus, else
// none: nothing is launched.
func TestAddress(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	if a, err := Address(); !errors.Is(err, ErrNoManager) {
		t.Errorf("no variable, no socket: %q, %v; want ErrNoManager", a, err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "bus"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if a, err := Address(); err != nil || a != "unix:path="+filepath.Join(dir, "bus") {
		t.Errorf("the runtime directory's socket: %q, %v", a, err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/elsewhere")
	if a, err := Address(); err != nil || a != "unix:path=/elsewhere" {
		t.Errorf("the variable: %q, %v", a, err)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "autolaunch:")
	t.Setenv("XDG_RUNTIME_DIR", "")
	if a, err := Address(); !errors.Is(err, ErrNoManager) {
		t.Errorf("autolaunch: and no runtime directory: %q, %v; want ErrNoManager", a, err)
	}
}

func TestUnitType(t *testing.T) {
	for unit, want := range map[string]string{"a.scope": "Scope", "custody-agent-1-2.service": "Service", ".scope": "", "a.slice": "", "scope": ""} {
		got, err := unitType(unit)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("unitType(%q) = %q, %v; want %q", unit, got, err, want)
		}
	}
}
