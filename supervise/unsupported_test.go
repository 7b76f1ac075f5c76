//go:build !linux && !darwin

package supervise_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/custody-dev/custody/supervise"
)

func TestUnsupported(t *testing.T) {
	if err := supervise.Serve(context.Background(), strings.NewReader(""), supervise.Config{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Serve: %v, want ErrUnsupported", err)
	}
	if err := supervise.Run(supervise.Config{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Run: %v, want ErrUnsupported", err)
	}
	c := &supervise.Client{}
	defer c.Close()
	if err := c.Register(supervise.Group{PGID: 4242, Start: 1}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Register: %v, want ErrUnsupported", err)
	}
}
