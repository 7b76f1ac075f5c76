package supervise

import (
	"sync"
	"time"

	"github.com/custody-dev/custody/scope"
)

// Nested owners on the process-group path. An owner's children may be owners themselves (a
// backend that starts a watchdog, which starts a server). With cgroups the inner owner's scopes
// sit below its own cgroup and the outer teardown reaches them; process groups do not nest, so
// the inner owner also registers its groups with the outer owner's supervisor:
//
//	outer supervisor      listens on the Unix socket $EnvNestSocket names, in a directory of
//	                      mode 0700 its [Client] made
//	outer owner           stamps that path, then the paths it was itself given, into each
//	                      process-group child's environment as $EnvOuter
//	nested owner → socket register <pid> <pgid> <start> [<pidfd_id>]   (one connection, many lines)
//	                      unregister <pgid>
//	supervisor → socket   ok | refused                                 one answer per line
//
// A registration is accepted only when all of these hold, read after the line arrived:
//   - the peer's credentials (SO_PEERCRED; macOS LOCAL_PEERCRED and LOCAL_PEERPID) name the
//     supervisor's own effective uid;
//   - the peer, or one of its ancestors (32 at most, by parent PID), is a member of a group the
//     supervisor covers whose identity holds: the peer is in the outer owner's scope;
//   - pid leads pgid now, with that start, and its parent is the peer: the group is one the peer
//     started, never a stranger's;
//   - the peer still has the start read first, after those reads: a peer PID taken by another
//     process meanwhile refuses the line instead of lending the checks to a stranger;
//   - the identity rules of a stdin registration (the pidfs id, when given, decides).
//
// An accepted group is covered as if the owner had registered it: the outer owner's death stops
// it. An unregister line is accepted only for a group the same connection registered. A closed
// connection unregisters nothing: an inner owner's death must not end the outer coverage of its
// residue. Nothing else is ever accepted on the socket (no legacy or cgroup lines).

const (
	// EnvNestSocket, in the supervisor's environment, is the Unix socket path on which [Run]
	// takes nested owners' registrations. [Client] sets it.
	EnvNestSocket = "CUSTODY_SUPERVISOR_NEST_SOCKET"
	// EnvOuter, in an owned child's environment, names the owner's supervisor's nest socket, then
	// those of the owners around it, nearest first, as a list like $PATH (':' between paths): a
	// custody owner running with it registers its process groups with each of them too, so that
	// every outer owner's death reaches them, even when the owners between died with their
	// supervisors.
	EnvOuter = "CUSTODY_OUTER_SUPERVISOR"
)

// NestTimeout bounds a nested owner's wait for the outer supervisor's answer.
const NestTimeout = 5 * time.Second

// Outer is a nested owner's connection to its outer owner's supervisor (see [EnvOuter]). The zero
// Outer with Path set is ready; it dials at the first call and, when the connection breaks (the
// outer supervisor was replaced), dials again once and replays what it registered. Methods are
// safe for concurrent use. On Windows every method returns an error wrapping
// [errors.ErrUnsupported].
type Outer struct {
	// Path is the outer supervisor's nest socket.
	Path string

	mu     sync.Mutex
	conn   outerConn
	groups map[int]Group
}

// Cover asks the outer supervisor to cover the process group d describes too, and returns once
// it has answered: nil when it covers it, an error wrapping [ErrRefused] when it refused. Other
// scopes need no outer cover, and it does nothing for them: a cgroup nests below the outer
// owner's, which kills it, and a job below the outer job.
func (o *Outer) Cover(d scope.Desc) error {
	if d.Kind != scope.KindGroup {
		return nil
	}
	return o.register(groupOf(d))
}

// Uncover asks the outer supervisor to stop covering a process group Cover covered.
func (o *Outer) Uncover(d scope.Desc) error {
	if d.Kind != scope.KindGroup {
		return nil
	}
	return o.unregister(d.PGID)
}

// Close closes the connection. It unregisters nothing: the outer supervisor keeps covering.
func (o *Outer) Close() error { return o.close() }
