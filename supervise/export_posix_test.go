//go:build linux || darwin

package supervise

import (
	"log/slog"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// SweepOne runs the supervisor's EOF sweep over one covered group recorded with the given leader
// start, as if its registration had been accepted: it exercises the identity check made at kill
// time, which a registration-time check would otherwise shadow.
func SweepOne(cfg Config, pgid int, start uint64) {
	cfg = cfg.withDefaults()
	g, err := scope.FromGroup(pgid, procid.ID{PID: pgid, Start: start})
	if err != nil {
		panic(err)
	}
	s := &server{cfg: cfg, log: cfg.Logger, self: ownGroup(), covered: map[int]*scope.Scope{pgid: g}}
	s.sweep()
}

// DiscardLogger is a logger that drops everything.
var DiscardLogger = slog.New(slog.DiscardHandler)

// Registration runs one protocol line through a fresh server and reports whether the group is
// covered and whether its scope is pinned by a pidfd on its leader; release closes what it holds.
func Registration(line string) (covered, held bool, release func()) {
	cfg := Config{}.withDefaults()
	s := &server{cfg: cfg, log: cfg.Logger, self: ownGroup(), covered: make(map[int]*scope.Scope)}
	s.handle([]byte(line))
	for _, g := range s.covered {
		covered, held = true, g.Pinned()
	}
	return covered, held, func() {
		for pgid := range s.covered {
			s.drop(pgid)
		}
	}
}

// ForgetInit makes the process look as if main had not called Init, until the test ends.
func ForgetInit(t interface{ Cleanup(func()) }) {
	was := initCalled.Swap(false)
	t.Cleanup(func() { initCalled.Store(was) })
}

// Bound runs one protocol line through a fresh server, as Registration does, and returns the
// server's owner-death sweep over what the line covered (pinned reports whether it covered a
// group pinned by its leader's pidfd), and a release of what it holds.
func Bound(cfg Config, line string) (pinned bool, sweep, release func()) {
	cfg = cfg.withDefaults()
	s := &server{cfg: cfg, log: cfg.Logger, self: ownGroup(), covered: make(map[int]*scope.Scope)}
	s.handle([]byte(line))
	for _, g := range s.covered {
		pinned = g.Pinned()
	}
	return pinned, s.sweep, func() {
		for pgid := range s.covered {
			s.drop(pgid)
		}
	}
}

// PipeFD returns the descriptor of the write end of the running supervisor's pipe, or -1.
func PipeFD(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sup == nil {
		return -1
	}
	fd := -1
	if rc, err := c.sup.w.SyscallConn(); err == nil {
		rc.Control(func(u uintptr) { fd = int(u) })
	}
	return fd
}
