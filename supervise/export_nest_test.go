//go:build linux || darwin

package supervise

import (
	"context"
	"io"
	"net"
)

// ListenNest makes a nest socket as [Run] does.
func ListenNest(path string) (*net.UnixListener, error) { return listen(path) }

// ServeNest serves in and the nest socket ln, as [Run] does with $EnvNestSocket set.
func ServeNest(ctx context.Context, in io.Reader, ln *net.UnixListener, cfg Config) error {
	return serveNest(ctx, in, ln, cfg.withDefaults())
}

// SweepNestDirs removes the unheld nest directories of tmp but own, as a supervisor does once
// ready, and returns their paths.
func SweepNestDirs(tmp, own string) []string { return sweepNestDirs(tmp, own) }
