//go:build linux || darwin

package supervise

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"golang.org/x/sys/unix"
)

type server struct {
	cfg     Config
	log     *slog.Logger
	self    int                     // the supervisor's own process group
	covered map[int]*scope.Scope    // covered process groups, each bound at its registration
	cgroups map[string]*scope.Scope // covered cgroups, each held open since its registration
	// owners holds every owner directory a covered cgroup lay in, and the owner's own
	// (Config.OwnerCgroup), kept after the cgroup is uncovered: at the owner's death what is left
	// of each is removed.
	owners map[string]bool
	// stale holds the groups whose identity form was refused (see markStale), staleOrder the
	// order they came in; a legacy registration of one is refused too.
	stale      map[int]bool
	staleOrder []int
	// stopping is set once the covered scopes were sent SIGTERM, at the owner's death: a scope
	// covered later (a line a dying thread was still writing) is sent it on arrival. deadline is
	// when the survivors get SIGKILL.
	stopping bool
	deadline time.Time
	// firstLook is when the sweep first looks whether the signalled cgroups are empty, a poll
	// interval after the SIGTERM; termed records that a cgroup had members to send it to.
	firstLook time.Time
	termed    bool
	// died is set when the owner's death word told of its death (Linux): the end of its pipe is
	// then its death, not a release.
	died bool
	env  envSweep // the scope ids of the covered groups, and their strays (envsweep_posix.go)
}

func serve(ctx context.Context, in io.Reader, cfg Config) error {
	if ctx.Done() != nil {
		if d, ok := in.(interface{ SetReadDeadline(time.Time) error }); ok {
			stop := context.AfterFunc(ctx, func() { d.SetReadDeadline(time.Now()) })
			defer stop()
		}
	}
	s := newServer(cfg)
	lr := &lineReader{r: in}
	for {
		line, err := lr.next()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.ownerInput(line, err, s.handle) {
			return nil
		}
	}
}

// ownerInput acts on one read of the owner's pipe: a line goes to handle, an over-long one is
// ignored, and the end of input sweeps every covered scope (any read error counts as the end: the
// owner can no longer speak, so it is gone or let go). It reports whether the supervisor is done.
func (s *server) ownerInput(line []byte, err error, handle func([]byte)) (done bool) {
	if ends(err) {
		if err != io.EOF {
			s.log.Warn("supervise: reading from owner", "err", err)
		}
		s.sweep()
		return true
	}
	switch {
	case err == nil:
		handle(line)
		return false
	case err == errLong:
		s.log.Debug("supervise: ignored line", "reason", err)
		return false
	default: // errDying
		// Every line written before the owner began to die has been read: what is covered now
		// is what its death must stop. The end of the pipe, or a last line, comes later.
		s.died = true
		s.stop()
		return false
	}
}

// ends reports whether a read of the owner's input that returned err ended it: the sweep
// follows. A line too long, and the owner's death told by its word, do not end it.
func ends(err error) bool { return err != nil && err != errLong && err != errDying }

func newServer(cfg Config) *server {
	s := &server{cfg: cfg, log: cfg.Logger, self: unix.Getpgrp(), covered: make(map[int]*scope.Scope), cgroups: make(map[string]*scope.Scope),
		owners: make(map[string]bool), stale: make(map[int]bool)}
	if cfg.OwnerCgroup != "" {
		s.owners[cfg.OwnerCgroup] = true
	}
	return s
}

func (s *server) handle(line []byte) {
	if s.env.line(line, s.log) {
		return
	}
	cmd, ok := parseLine(line)
	if !ok {
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("supervise: ignored line", "line", string(line))
		}
		return
	}
	switch cmd.verb {
	case verbCgroup:
		s.coverCgroup(cmd.path)
		return
	case verbUncgroup:
		s.dropCgroup(cmd.path)
		return
	}
	if why := s.refuse(cmd.pgid); why != "" {
		s.log.Warn("supervise: refused target", "pgid", cmd.pgid, "reason", why)
		return
	}
	switch cmd.verb {
	case verbRegister:
		s.register(cmd)
	case verbUnregister:
		s.drop(cmd.pgid)
		s.env.forget(cmd.pgid)
	}
}

// refuse says why a group must never be covered, or "" when it may be.
func (s *server) refuse(pgid int) string {
	switch {
	case pgid <= 1:
		// kill(0) is our own group, kill(-1) every process we may signal, kill(-pgid) of a
		// negative number a single PID: none of them is a group.
		return "not a process group id"
	case pgid == s.self:
		return "the supervisor's own group"
	case pgid == s.cfg.OwnerPGID:
		return "the owner's group"
	}
	return ""
}

// register covers a group, bound by [scope.BindGroup] with the line's leader start and pidfs id
// when it has them: a leader alive now is bound (and pinned with a pidfd where the kernel can),
// even one that has not yet joined its group, since the owner may have written the line before
// the child's setpgid ran; a leader given with a start or pidfs id must still be that process; a
// group with neither a leader nor members is already gone and is not recorded: recording it
// would let a later group with the same id, a stranger, match.
func (s *server) register(cmd command) {
	if cmd.legacy && s.stale[cmd.pgid] {
		// The Hermes supervisor's rule: a group whose identity was refused is not covered on
		// the legacy form's weaker word, which would bind whatever group has that id now.
		s.log.Warn("supervise: refused target", "pgid", cmd.pgid, "reason", "its identity was refused; the legacy form does not override that")
		return
	}
	if cmd.pid != cmd.pgid {
		s.log.Warn("supervise: refused target", "pgid", cmd.pgid, "pid", cmd.pid, "reason", "pid is not the group's leader")
		return
	}
	leader := procid.ID{PID: cmd.pgid, PidfdID: cmd.id}
	if cmd.known {
		leader.Start = cmd.start
	}
	g, err := scope.BindGroup(cmd.pgid, leader)
	if !cmd.legacy {
		s.markStale(cmd.pgid, err != nil && (errors.Is(err, procid.ErrReused) || errors.Is(err, procid.ErrGone)))
	}
	switch {
	case err == nil:
		s.cover(cmd.pgid, g)
	case errors.Is(err, procid.ErrReused):
		s.log.Warn("supervise: refused target", "pgid", cmd.pgid, "reason", "leader pid names another process",
			"start", cmd.start, "pidfs_id", cmd.id, "err", err)
	case errors.Is(err, procid.ErrGone):
		s.log.Debug("supervise: group already gone", "pgid", cmd.pgid)
	default:
		s.log.Warn("supervise: refused target", "pgid", cmd.pgid, "reason", err)
	}
}

// maxStale bounds the groups remembered as refused: memory stays bounded whatever the owner
// writes. Past it, the oldest is forgotten first.
const maxStale = 1024

// markStale remembers (or, once an identity form is accepted, forgets) that the identity of
// group pgid was refused as stale: its leader gone, or its PID another process's.
func (s *server) markStale(pgid int, stale bool) {
	if !stale {
		delete(s.stale, pgid)
		return
	}
	if s.stale[pgid] {
		return
	}
	if s.stale == nil {
		s.stale = make(map[int]bool)
	}
	if len(s.staleOrder) >= maxStale {
		delete(s.stale, s.staleOrder[0])
		s.staleOrder = s.staleOrder[1:]
	}
	s.stale[pgid] = true
	s.staleOrder = append(s.staleOrder, pgid)
}

// cover records a group, replacing (and releasing) what a previous registration of it held. A
// group covered while its owner dies is sent SIGTERM at once.
func (s *server) cover(pgid int, g *scope.Scope) {
	s.drop(pgid)
	s.covered[pgid] = g
	if s.stopping {
		s.signalGroup(pgid, g, unix.SIGTERM)
	}
}

// drop forgets a group and releases what its scope holds (the pidfd on its leader).
func (s *server) drop(pgid int) {
	if g, ok := s.covered[pgid]; ok {
		g.Release()
		delete(s.covered, pgid)
	}
}

// sweep stops every covered cgroup and every covered group whose identity holds: SIGTERM (unless
// the owner's death already sent it), a wait of up to the grace, SIGKILL (cgroup.kill for
// cgroups).
func (s *server) sweep() {
	if len(s.covered) > 0 || len(s.cgroups) > 0 || s.env.any() {
		s.stop()
		s.awaitCgroups(s.deadline)
		s.sweepGroups(s.deadline)
		s.env.finish(s.deadline, s.log)
	}
	s.removeDeadOwners()
}

// stop sends SIGTERM to every covered scope, once, and starts the grace.
func (s *server) stop() {
	if s.stopping {
		return
	}
	s.stopping = true
	now := time.Now()
	s.deadline = now.Add(s.cfg.Grace)
	s.firstLook = now.Add(pollInterval)
	s.signalAll(unix.SIGTERM)
	s.signalCgroups(unix.SIGTERM)
}

// sweepGroups polls the signalled groups until they are empty, and SIGKILLs survivors at the
// deadline. A group whose members are all zombies is empty: they have exited, though kill(-pgid,
// 0) counts them until their new parent reaps them, which some inits never do.
func (s *server) sweepGroups(deadline time.Time) {
	for len(s.covered) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			s.signalAll(unix.SIGKILL)
			return
		}
		time.Sleep(min(pollInterval, left))
		// One /proc scan a poll for all the groups, not one a group: a thousand groups whose
		// members are zombies (which their new parent may be slow to reap, or never reap)
		// would otherwise cost a thousand scans a poll.
		var census scope.Census
		for pgid, g := range s.covered {
			if gone(g, &census) {
				s.drop(pgid)
			}
		}
	}
}

// gone reports whether a covered group is proven empty, its live members looked up in census.
func gone(g *scope.Scope, census *scope.Census) bool {
	empty, err := g.EmptyIn(census)
	return err == nil && empty
}

// signalAll sends sig to every covered group whose identity holds at that moment (see
// scope.Scope.Signal: through the leader's pidfd where one is held, else after a fresh check),
// and drops the groups that are gone or no longer proven.
func (s *server) signalAll(sig unix.Signal) {
	for pgid, g := range s.covered {
		s.signalGroup(pgid, g, sig)
	}
}

// signalGroup sends sig to one covered group whose identity holds (see signalAll).
func (s *server) signalGroup(pgid int, g *scope.Scope, sig unix.Signal) {
	if why := s.refuse(pgid); why != "" {
		// Registration refused it already; checked again because a slip here is kill(-1).
		s.log.Error("supervise: refused target in the covered set", "pgid", pgid, "reason", why)
		s.drop(pgid)
		return
	}
	switch err := g.Signal(sig); {
	case err == nil:
	case errors.Is(err, procid.ErrGone):
		s.drop(pgid)
	case errors.Is(err, authority.ErrNoAuthority):
		s.log.Warn("supervise: not signalling", "pgid", pgid, "signal", sig.String(), "reason", err)
		s.drop(pgid)
	default:
		s.log.Warn("supervise: signal failed", "pgid", pgid, "signal", sig.String(), "err", err)
	}
}
