package sdunit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	sd "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// Conn is a private connection to the user manager on the session bus.
type Conn struct{ c *sd.Conn }

func address() (string, error) {
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" && a != "autolaunch:" {
		return a, nil
	}
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return "", fmt.Errorf("sdunit: %w: neither $DBUS_SESSION_BUS_ADDRESS nor $XDG_RUNTIME_DIR is set", ErrNoManager)
	}
	p := filepath.Join(rt, "bus")
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return "", fmt.Errorf("sdunit: %w: $DBUS_SESSION_BUS_ADDRESS is not set and %s is no socket", ErrNoManager, p)
	}
	return "unix:path=" + p, nil
}

func dial(ctx context.Context) (*Conn, error) {
	a, err := address()
	if err != nil {
		return nil, err
	}
	// godbus finds the address as address() does, but would otherwise launch a bus with
	// dbus-launch ("autolaunch") where there is none: a daemon custody must never start. With
	// the variable set, it dials exactly the address checked above.
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") != a {
		os.Setenv("DBUS_SESSION_BUS_ADDRESS", a)
	}
	c, err := sd.NewUserConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("sdunit: connect to %s: %w: %w", a, ErrNoManager, err)
	}
	// A bus without a user manager behind it (a session bus of its own) answers the call with
	// "unknown name": the manager is what must answer.
	if _, err := c.SystemStateContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("sdunit: ask the user manager on %s: %w: %w", a, ErrNoManager, err)
	}
	return &Conn{c: c}, nil
}

func (c *Conn) close() { c.c.Close() }

// delegate is the property Delegate=yes: a bare boolean, as systemd-run -p Delegate=yes sends it.
var delegate = sd.Property{Name: "Delegate", Value: godbus.MakeVariant(true)}

// collect unloads the unit once it is inactive or failed: a failed unit would otherwise stay
// loaded in the manager until someone reset it.
var collect = sd.Property{Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")}

func (c *Conn) startScope(ctx context.Context, name string, pid int) error {
	props := []sd.Property{
		sd.PropDescription("custody: the scopes of process " + fmt.Sprint(pid)),
		sd.PropPids(uint32(pid)),
		delegate, collect,
	}
	return c.start(ctx, name, props)
}

func (c *Conn) startService(ctx context.Context, name string, argv, env []string) error {
	props := []sd.Property{
		sd.PropDescription("custody: an agent for " + filepath.Base(argv[0])),
		sd.PropExecStart(argv, false),
		sd.PropType("exec"),
		{Name: "Environment", Value: godbus.MakeVariant(env)},
		// The agent's children are its to stop: when it exits, systemd must not kill them
		// before the agent's own stop has run, and afterwards nothing is left to kill.
		{Name: "KillMode", Value: godbus.MakeVariant("mixed")},
		delegate, collect,
	}
	return c.start(ctx, name, props)
}

// start starts a transient unit and waits for its start job's result.
func (c *Conn) start(ctx context.Context, name string, props []sd.Property) error {
	done := make(chan string, 1)
	if _, err := c.c.StartTransientUnitContext(ctx, name, "fail", props, done); err != nil {
		return fmt.Errorf("sdunit: start %s: %w", name, err)
	}
	return jobResult(ctx, "start", name, done)
}

func (c *Conn) stop(ctx context.Context, name string) error {
	done := make(chan string, 1)
	if _, err := c.c.StopUnitContext(ctx, name, "fail", done); err != nil {
		return fmt.Errorf("sdunit: stop %s: %w", name, err)
	}
	return jobResult(ctx, "stop", name, done)
}

// jobResult waits for a job's result: "done", or why not ("failed", "timeout", "canceled",
// "dependency", "skipped"; see org.freedesktop.systemd1(5), JobRemoved).
func jobResult(ctx context.Context, op, name string, done <-chan string) error {
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("sdunit: %s %s: the job's result is %q", op, name, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sdunit: %s %s: %w", op, name, context.Cause(ctx))
	}
}

func (c *Conn) delegated(ctx context.Context, unit string) (bool, error) {
	typ, err := unitType(unit)
	if err != nil {
		return false, err
	}
	p, err := c.c.GetUnitTypePropertyContext(ctx, unit, typ, "Delegate")
	if err != nil {
		return false, fmt.Errorf("sdunit: %s's Delegate: %w", unit, err)
	}
	v, ok := p.Value.Value().(bool)
	if !ok {
		return false, fmt.Errorf("sdunit: %s's Delegate is %s, not a boolean", unit, p.Value.Signature())
	}
	return v, nil
}
