//go:build unix && !linux

package scope

import "testing"

// WithoutGroupSignal changes nothing here: no group is ever pinned.
func WithoutGroupSignal(*testing.T) {}
