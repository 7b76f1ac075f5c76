package sdunit

import "context"

// Address returns the session bus address a user manager would answer on:
// $DBUS_SESSION_BUS_ADDRESS, else the socket $XDG_RUNTIME_DIR/bus when it exists. The error
// wraps [ErrNoManager] when there is neither (nothing is ever launched to provide one).
func Address() (string, error) { return address() }

// Dial connects to the user manager on the session bus ([Address]) and checks that it answers.
func Dial(ctx context.Context) (*Conn, error) { return dial(ctx) }

// Close closes the connection; units started through it keep running.
func (c *Conn) Close() { c.close() }

// StartScope starts the transient scope unit name (ending in ".scope") with Delegate=yes,
// holding the process pid, and returns once the manager has moved it there. The manager can
// move it only out of a cgroup the user may write (a desktop session's, under user@UID.service);
// out of a root-owned one (an SSH session's session-N.scope) it asks the system manager, where
// there is one, and the job fails otherwise.
func (c *Conn) StartScope(ctx context.Context, name string, pid int) error {
	return c.startScope(ctx, name, pid)
}

// StartService starts the transient service unit name (ending in ".service") with
// Delegate=yes, running argv with the environment env (KEY=VALUE), and returns once the manager
// has forked it (Type=exec: once the exec succeeded). The unit is collected when its main
// process ends, however it ends.
func (c *Conn) StartService(ctx context.Context, name string, argv, env []string) error {
	return c.startService(ctx, name, argv, env)
}

// Delegated reports whether the manager says that unit has Delegate=yes: read back over D-Bus,
// since a user manager makes every cgroup of its own user-owned, so that a writable cgroup
// alone proves nothing about delegation.
func (c *Conn) Delegated(ctx context.Context, unit string) (bool, error) {
	return c.delegated(ctx, unit)
}

// Stop stops unit and waits for the stop job to finish.
func (c *Conn) Stop(ctx context.Context, unit string) error { return c.stop(ctx, unit) }
