//go:build linux || darwin

package supervise

import "log/slog"

// SweepOne runs the supervisor's EOF sweep over one covered group recorded with the given leader
// start, as if its registration had been accepted: it exercises the identity check made at kill
// time, which a registration-time check would otherwise shadow.
func SweepOne(cfg Config, pgid int, start uint64, bound bool) {
	cfg = cfg.withDefaults()
	s := &server{cfg: cfg, log: cfg.Logger, self: ownGroup(), covered: map[int]leader{pgid: {start: start, bound: bound}}}
	s.sweep()
}

// DiscardLogger is a logger that drops everything.
var DiscardLogger = slog.New(slog.DiscardHandler)

// Registration runs one protocol line through a fresh server and reports whether the group is
// covered and whether the server holds a pidfd on its leader; release closes what it holds.
func Registration(line string) (covered, held bool, release func()) {
	cfg := Config{}.withDefaults()
	s := &server{cfg: cfg, log: cfg.Logger, self: ownGroup(), covered: make(map[int]leader)}
	s.handle([]byte(line))
	for _, l := range s.covered {
		covered, held = true, l.held
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
