//go:build !linux && !darwin

package supervise

import (
	"errors"
	"fmt"
)

type outerConn struct{}

func (o *Outer) register(Group) error {
	return fmt.Errorf("supervise: outer register: %w", errors.ErrUnsupported)
}

func (o *Outer) unregister(int) error {
	return fmt.Errorf("supervise: outer unregister: %w", errors.ErrUnsupported)
}

func (o *Outer) close() error { return nil }
