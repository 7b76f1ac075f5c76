package supervise

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/custody-dev/custody/stop"
)

// pollInterval is how often the supervisor checks whether signalled groups are gone.
const pollInterval = 100 * time.Millisecond

// Config is the supervisor's configuration.
type Config struct {
	// OwnerPGID is the owner's process group. The supervisor refuses to cover it: signalling it
	// would kill the owner's siblings (a shell pipeline, a terminal's foreground job). 0 means
	// not known; groups ≤ 1 and the supervisor's own group are refused regardless.
	OwnerPGID int
	// Grace is how long groups have, after SIGTERM, to exit before SIGKILL. 0 means
	// [stop.DefaultGrace], the default of every stop.
	Grace time.Duration
	// OwnerCgroup is the owner's directory of cgroup scopes (a hierarchy path, see
	// scope.OwnerDir), or "": at the owner's death the supervisor removes what is left of it
	// once empty, even when no cgroup it was told of lay there (an owner killed between making
	// the directory and covering its first scope).
	OwnerCgroup string
	// Logger receives refusals (warn), identity losses and signal failures (warn), and ignored
	// lines (debug). Nil discards.
	Logger *slog.Logger
}

func (cfg Config) withDefaults() Config {
	cfg.Grace = stop.Grace(cfg.Grace)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Serve runs the supervisor protocol (see the package doc) on in until EOF or a read error, then
// stops every group it still covers whose identity holds: SIGTERM, a check every 100 ms for up
// to cfg.Grace, then SIGKILL for survivors, the identity re-checked before each signal. It then
// returns nil: the owner is gone, and the supervisor's job with it.
//
// Cancelling ctx makes Serve return ctx.Err() without signalling anything; it is meant for
// embedding, not for owner death. A blocked read is interrupted only when in has a
// SetReadDeadline method that works (an *os.File in non-blocking mode); otherwise Serve notices
// the cancellation after the next read. Once EOF has been read the sweep runs to its end.
//
// Serve reads with a fixed buffer and never holds more than [MaxLine] bytes of a line. On
// Windows it returns an error wrapping [errors.ErrUnsupported].
func Serve(ctx context.Context, in io.Reader, cfg Config) error {
	return serve(ctx, in, cfg.withDefaults())
}
