//go:build linux || darwin

package supervise

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"golang.org/x/sys/unix"
)

// killWait bounds the wait for a cgroup to empty after cgroup.kill, before it is removed: the
// kernel delivers the kill at once, but exiting a large process takes a while.
const killWait = 2 * time.Second

// coverCgroup covers a cgroup scope: it is opened now, before the owner's child exists, and the
// descriptor held is what the sweep kills. On macOS, with no cgroups, the open fails and the line
// is ignored like any line the supervisor cannot use.
func (s *server) coverCgroup(path string) {
	// Its owner directory is remembered even when the cgroup is gone by the time the line is
	// read (a child that ended and was released before a busy supervisor got to its line): the
	// directory is still there, to be removed at the owner's death (removeDeadOwners).
	s.owners[filepath.Dir(path)] = true
	sc, err := scope.OpenCgroup(path)
	switch {
	case errors.Is(err, procid.ErrGone): // released and removed before the line was read
		s.log.Debug("supervise: cgroup already gone", "cgroup", path)
		return
	case err != nil:
		s.log.Warn("supervise: refused cgroup", "cgroup", path, "err", err)
		return
	}
	s.dropCgroup(path)
	s.cgroups[path] = sc
	if s.stopping { // covered while the owner dies
		s.signalCgroup(path, sc, unix.SIGTERM)
	}
}

// dropCgroup stops covering a cgroup, leaving its processes alone.
func (s *server) dropCgroup(path string) {
	if sc, ok := s.cgroups[path]; ok {
		sc.Release()
		delete(s.cgroups, path)
	}
}

// signalCgroups sends sig to every process in every covered cgroup, all at once (scope.SignalAll,
// which asks once per directory whether cgroups lie below them).
func (s *server) signalCgroups(sig unix.Signal) {
	if len(s.cgroups) == 0 {
		return
	}
	paths := slices.Collect(maps.Keys(s.cgroups))
	scopes := make([]*scope.Scope, len(paths))
	for i, path := range paths {
		scopes[i] = s.cgroups[path]
	}
	for i, err := range scope.SignalAll(scopes, sig) {
		s.signalled(paths[i], sig, err)
	}
}

// signalCgroup sends sig to every process in one covered cgroup.
func (s *server) signalCgroup(path string, sc *scope.Scope, sig unix.Signal) {
	s.signalled(path, sig, scope.SignalAll([]*scope.Scope{sc}, sig)[0])
}

// signalled notes a signal sent to a cgroup that had members, and logs one that failed, but for
// a cgroup already empty.
func (s *server) signalled(path string, sig unix.Signal, err error) {
	if err == nil {
		s.termed = true
	}
	if err != nil && !errors.Is(err, procid.ErrGone) {
		s.log.Warn("supervise: signal failed", "cgroup", path, "signal", sig.String(), "err", err)
	}
}

// awaitCgroups waits, until the deadline, for the covered cgroups to empty; it then kills the
// rest with cgroup.kill, and removes every one once empty. When the SIGTERM reached members, it
// first sleeps until a poll interval after it, as the sweep of process groups does: the
// processes it signalled are exiting on the same CPUs, and a supervisor woken by each cgroup
// that empties (a wake-up and a read each, twenty in the first two milliseconds of a sweep of
// twenty scopes) takes CPU time from them. The cgroups are then waited on together
// (scope.WaitAll: one epoll on their cgroup.events, each read when the kernel says it changed):
// one wait per cgroup in turn would cost each its own wake-up, and the kernel delays a
// cgroup.events notification up to 10 ms after the previous one, which over 1,000 cgroups adds
// up to seconds.
func (s *server) awaitCgroups(deadline time.Time) {
	if len(s.cgroups) == 0 {
		return
	}
	if s.termed {
		time.Sleep(time.Until(earliest(s.firstLook, deadline)))
	}
	left := s.awaitEmpty(deadline)
	if len(left) > 0 {
		for _, sc := range left {
			sc.Signal(unix.SIGKILL) // cgroup.kill
		}
		for path := range s.awaitEmpty(time.Now().Add(killWait)) {
			s.log.Warn("supervise: cgroup not empty after cgroup.kill", "cgroup", path)
		}
	}
	for path, sc := range s.cgroups {
		if err := sc.Close(); err != nil {
			s.log.Warn("supervise: remove cgroup", "cgroup", path, "err", err)
		}
		delete(s.cgroups, path)
	}
}

// removeDeadOwners removes what is left of the directories of every cgroup ever covered, when
// their owner is dead. A dead owner may have left a cgroup it had made but not covered yet (the
// spare it was making when it died), or only its directory (its children all gone, their cgroups
// uncovered and removed): at the end of its pipe none of its threads is left to remove them, and
// nobody but a reap would. A populated cgroup there (a child given to another owner) stays, and
// so does the directory: a reap's to remove once it empties. The end of the pipe comes before the
// owner's exit is complete (it closes its files first): when its death word told of its death,
// that completion is waited for, within the grace; otherwise (a release, or no word) the owner is
// looked at once, and a live owner's directory is left to it.
func (s *server) removeDeadOwners() {
	if len(s.owners) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), s.deadline)
	defer cancel()
	if !s.died {
		cancel()
	}
	for dir := range s.owners {
		if err := scope.RemoveDeadOwnerDir(ctx, dir); err != nil {
			s.log.Debug("supervise: remove the dead owner's cgroups", "cgroup", dir, "err", err)
		}
	}
}

// earliest returns the earlier of two times.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// awaitEmpty waits until the covered cgroups are all empty or the deadline passes, and returns
// those not seen empty (still populated, or unreadable).
func (s *server) awaitEmpty(deadline time.Time) map[string]*scope.Scope {
	paths := make(map[*scope.Scope]string, len(s.cgroups))
	for path, sc := range s.cgroups {
		paths[sc] = path
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	left := make(map[string]*scope.Scope)
	for _, sc := range scope.WaitAll(ctx, slices.Collect(maps.Keys(paths))) {
		left[paths[sc]] = sc
	}
	return left
}
