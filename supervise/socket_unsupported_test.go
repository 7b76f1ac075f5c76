//go:build !linux && !darwin

package supervise_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/supervise"
)

// TestSocketUnsupported: the v2 form says so where the supervisor cannot run, and makes no socket.
func TestSocketUnsupported(t *testing.T) {
	path := filepath.Join(testproc.TempDir(t), "s")
	if err := supervise.RunSocket(supervise.Config{}, path); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("RunSocket: %v, want ErrUnsupported", err)
	}
	if err := supervise.ServeSocket(context.Background(), strings.NewReader(""), nil, supervise.Config{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ServeSocket: %v, want ErrUnsupported", err)
	}
	if matches, _ := filepath.Glob(path + "*"); len(matches) > 0 {
		t.Errorf("RunSocket made %v", matches)
	}
}
