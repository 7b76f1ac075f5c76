package procid

import (
	"errors"
	"strings"
	"testing"
)

// TestSupported: where the incarnation of this very process can be read, Supported says nothing;
// elsewhere its error names the OS and wraps errors.ErrUnsupported, in one lowercase line.
func TestSupported(t *testing.T) {
	if err := Supported(); err != nil {
		t.Fatalf("Supported: %v", err)
	}
	if _, err := Self(); err != nil {
		t.Fatalf("Self: %v", err)
	}
	err := unsupportedOS("freebsd")
	msg := err.Error()
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(msg, "freebsd") || strings.Contains(msg, "\n") ||
		strings.HasSuffix(msg, ".") || msg != strings.ToLower(msg[:1])+msg[1:] {
		t.Errorf("unsupportedOS(freebsd) = %q: want one lowercase line naming freebsd, wrapping errors.ErrUnsupported", msg)
	}
}
