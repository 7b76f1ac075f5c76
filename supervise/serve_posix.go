//go:build linux || darwin

package supervise

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"golang.org/x/sys/unix"
)

// leader is what the supervisor remembers of a covered group: its leader's incarnation, when one
// was known at registration.
type leader struct {
	start uint64
	id    uint64 // the leader's pidfs id, when the owner sent one: it decides over start
	bound bool   // start names the leader; false: no leader was alive (or readable) at registration
	// pidfd is a pidfd on the leader proven at registration (see provenLeader) when held is
	// set. The zero leader holds none.
	pidfd int
	held  bool
}

type server struct {
	cfg     Config
	log     *slog.Logger
	self    int // the supervisor's own process group
	covered map[int]leader
	cgroups map[string]*scope.Scope // covered cgroups, each held open since its registration
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
	switch {
	case err == nil:
		handle(line)
		return false
	case err == errLong:
		s.log.Debug("supervise: ignored line", "reason", err)
		return false
	case err != io.EOF:
		s.log.Warn("supervise: reading from owner", "err", err)
	}
	s.sweep()
	return true
}

func newServer(cfg Config) *server {
	return &server{cfg: cfg, log: cfg.Logger, self: unix.Getpgrp(), covered: make(map[int]leader), cgroups: make(map[string]*scope.Scope)}
}

func (s *server) handle(line []byte) {
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

// register covers a group. A leader given with its start is bound to it, after checking that the
// PID still names it; otherwise the leader alive now (if any) is bound, even when it has not yet
// joined its group: the owner may have written the line before the child's setpgid ran, and a
// process alive now cannot have a PID shared with an older group. A group with neither a leader
// nor members is already gone and is not recorded: recording it would let a later group with
// the same id, a stranger, match.
func (s *server) register(cmd command) {
	if cmd.pid != cmd.pgid {
		s.log.Warn("supervise: refused target", "pgid", cmd.pgid, "pid", cmd.pid, "reason", "pid is not the group's leader")
		return
	}
	fd := openLeader(cmd.pgid) // before the read: see provenLeader
	inc, err := procid.Read(cmd.pgid)
	foreign := err == nil && cmd.known && inc.Start != cmd.start
	if cmd.id != 0 && err == nil && !foreign {
		// Equal starts do not settle it: a process that took the PID within the tick the
		// leader started in has them too. The pidfs id does.
		if now, ok := leaderID(fd); ok && now != cmd.id {
			foreign, inc.Start = true, 0
		}
	}
	if err != nil || foreign {
		closeLeader(fd)
	}
	switch {
	case foreign:
		s.log.Warn("supervise: refused target", "pgid", cmd.pgid, "reason", "leader pid names another process",
			"start", cmd.start, "now", inc.Start, "pidfs_id", cmd.id)
	case err == nil:
		l := leader{start: inc.Start, id: cmd.id, bound: true, pidfd: provenLeader(fd)}
		l.held = l.pidfd >= 0
		s.cover(cmd.pgid, l)
	case errors.Is(err, procid.ErrGone) && !groupExists(cmd.pgid):
		s.log.Debug("supervise: group already gone", "pgid", cmd.pgid)
	case errors.Is(err, procid.ErrGone) && cmd.known:
		s.cover(cmd.pgid, leader{start: cmd.start, id: cmd.id, bound: true})
	default:
		s.cover(cmd.pgid, leader{id: cmd.id})
	}
}

// cover records a group, replacing (and closing) what a previous registration of it held.
func (s *server) cover(pgid int, l leader) {
	s.drop(pgid)
	s.covered[pgid] = l
}

// drop forgets a group and closes its leader's pidfd.
func (s *server) drop(pgid int) {
	if l, ok := s.covered[pgid]; ok {
		if l.held {
			closeLeader(l.pidfd)
		}
		delete(s.covered, pgid)
	}
}

// holds reports whether a covered group's identity still holds; if not, why says why, or is
// empty when the group is simply gone.
func (s *server) holds(pgid int, l leader) (bool, string) {
	if l.id != 0 && procid.PidfsError() == nil {
		switch err := (procid.ID{PID: pgid, Start: l.start, PidfdID: l.id}).Verify(); {
		case err == nil:
			return true, ""
		case errors.Is(err, procid.ErrReused):
			return false, "leader pid names another process"
		case errors.Is(err, procid.ErrGone):
			return groupExists(pgid), ""
		default:
			return false, "leader unreadable: " + err.Error()
		}
	}
	inc, err := procid.Read(pgid)
	switch {
	case err == nil && l.bound && inc.Start == l.start:
		return true, ""
	case err == nil:
		return false, "leader pid names another process"
	case errors.Is(err, procid.ErrGone):
		// The leader exited; its PID stays reserved while the group has members, so members
		// mean the group is still the registered one.
		return groupExists(pgid), ""
	}
	return false, "leader unreadable: " + err.Error()
}

// sweep stops every covered cgroup and every covered group whose identity holds: SIGTERM, a wait
// of up to the grace, SIGKILL (cgroup.kill for cgroups).
func (s *server) sweep() {
	if len(s.covered) == 0 && len(s.cgroups) == 0 {
		return
	}
	deadline := time.Now().Add(s.cfg.Grace)
	s.signalAll(unix.SIGTERM)
	s.signalCgroups(unix.SIGTERM)
	s.awaitCgroups(deadline)
	s.sweepGroups(deadline)
}

// sweepGroups polls the signalled groups until they are gone, and SIGKILLs survivors at the
// deadline.
func (s *server) sweepGroups(deadline time.Time) {
	for len(s.covered) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			s.signalAll(unix.SIGKILL)
			return
		}
		time.Sleep(min(pollInterval, left))
		// One /proc scan a poll tells groups whose members are all zombies: they have exited, but
		// kill(-pgid, 0) counts them until their new parent reaps them, which some inits never do.
		live, scanErr := procid.LiveGroups()
		for pgid := range s.covered {
			if !groupExists(pgid) || scanErr == nil && !live[pgid] {
				s.drop(pgid)
			}
		}
	}
}

// signalAll sends sig to every covered group whose identity holds at that moment, and drops the
// groups that are gone or no longer proven. A group whose leader's pidfd was proven at
// registration is signalled through it, which needs no check; the others by id, after one.
func (s *server) signalAll(sig unix.Signal) {
	for pgid, l := range s.covered {
		if why := s.refuse(pgid); why != "" {
			// Registration refused it already; checked again because a slip here is kill(-1).
			s.log.Error("supervise: refused target in the covered set", "pgid", pgid, "reason", why)
			s.drop(pgid)
			continue
		}
		tried, err := false, error(nil)
		if l.held {
			tried, err = signalByLeader(l.pidfd, sig)
		}
		if !tried {
			ok, why := s.holds(pgid, l)
			if !ok {
				if why != "" {
					s.log.Warn("supervise: not signalling", "pgid", pgid, "signal", sig.String(), "reason", why)
				}
				s.drop(pgid)
				continue
			}
			err = unix.Kill(-pgid, sig)
		}
		switch err {
		case nil:
		case unix.ESRCH:
			s.drop(pgid)
		default:
			s.log.Warn("supervise: signal failed", "pgid", pgid, "signal", sig.String(), "err", err)
		}
	}
}

// groupExists reports whether some process is in the group: only ESRCH proves it empty (EPERM
// means members we may not signal).
func groupExists(pgid int) bool {
	return unix.Kill(-pgid, 0) != unix.ESRCH
}
