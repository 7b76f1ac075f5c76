package supervise

import (
	"context"
	"errors"
	"io"
	"net"
	"time"
)

// The v2 form of the protocol, as the Hermes supervisor speaks it, lets a child register its own
// group over a Unix socket, so that the owner never has to name a PID it did not see start:
//
//	supervisor → stdout   ready                                once the socket listens
//	owner → stdin         reserve <token>                      allow one registration with token
//	owner → stdin         cancel <token>                       withdraw it
//	child → socket        register <token> <pid> <pgid> <start> one line per connection
//	supervisor → socket   ok                                   the group is covered
//
// A socket registration is accepted only when the token was reserved (and it is consumed by the
// attempt, accepted or not), the connecting process is pid (its peer credentials say so), pid
// leads the group pgid, and start is pid's exact start (see [procid.ID]). Anything else, a
// malformed line, a wrong token, or a connection that sends no line within [SocketTimeout], is
// closed without an answer and registers nothing; the supervisor keeps serving. Every stdin line
// of the first form keeps its meaning, and end of input on stdin is handled before any pending
// socket registration: the owner's death is never delayed by a child's connection.

// SocketTimeout is how long a socket connection has to send its register line.
const SocketTimeout = 5 * time.Second

// ErrSocket is wrapped by [RunSocket]'s error when the socket cannot be set up (the path exists,
// is too long, or its directory is not writable).
var ErrSocket = errors.New("supervise: socket cannot be set up")

// RunSocket is [Run] for the v2 form: it listens on a new Unix socket at path (no access for group or others; an
// existing file there is an error, never removed), prints "ready" on standard output, and serves
// standard input and the socket until end of input, removing the socket when it returns. On
// Windows it returns an error wrapping [errors.ErrUnsupported].
func RunSocket(cfg Config, path string) error { return runSocket(cfg, path) }

// ServeSocket is [Serve] with the v2 socket: registrations arrive on ln as well as on in.
// Closing ln is the caller's.
func ServeSocket(ctx context.Context, in io.Reader, ln *net.UnixListener, cfg Config) error {
	return serveSocket(ctx, in, ln, cfg.withDefaults())
}
