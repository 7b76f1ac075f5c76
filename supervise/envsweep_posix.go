//go:build linux || darwin

package supervise

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/custody-dev/custody/scope"
	"golang.org/x/sys/unix"
)

// envSweep is the supervisor's part of the environment sweep (see scope.FindStrays): the scope
// id of each covered process group, told by an "envid <pgid> <id>" line after its register
// line, and at the owner's death the processes of the supervisor's user (the owner's) carrying
// any of them, which the group's signals miss once they left it (setsid, setpgid). A Hermes
// supervisor ignores the line; the group is covered as before.
type envSweep struct {
	ids    map[int]string // scope id by process group
	strays *scope.Strays  // found at the owner's death
}

// line takes an envid line; it reports whether line was one (well-formed or not).
func (e *envSweep) line(line []byte, log *slog.Logger) bool {
	rest, ok := bytes.CutPrefix(line, []byte("envid "))
	if !ok {
		return false
	}
	var f [3][]byte
	n := fields(rest, f[:])
	pgid, okID := parseID(f[0])
	if n != 2 || !okID || pgid <= 1 || !scope.ValidEnvID(string(f[1])) {
		log.Debug("supervise: ignored line", "line", string(line))
		return true
	}
	if e.ids == nil {
		e.ids = make(map[int]string)
	}
	e.ids[pgid] = string(f[1])
	return true
}

// forget drops a group's id, at its unregistration.
func (e *envSweep) forget(pgid int) { delete(e.ids, pgid) }

func (e *envSweep) any() bool { return len(e.ids) > 0 }

// signal sends sig to every process carrying a covered id, looking for them first (and again at
// each call: a process may have forked since).
func (e *envSweep) signal(sig unix.Signal, log *slog.Logger) {
	if len(e.ids) == 0 {
		return
	}
	if e.strays == nil {
		ids := make([]string, 0, len(e.ids))
		for _, id := range e.ids {
			ids = append(ids, id)
		}
		s, err := scope.FindStrays(ids, os.Getuid())
		if err != nil {
			log.Warn("supervise: environment sweep", "err", err)
			return
		}
		e.strays = s
	}
	if err := e.strays.Signal(sig); err != nil {
		log.Warn("supervise: environment sweep", "signal", sig.String(), "err", err)
	}
}

// finish sends SIGTERM to the strays, waits for them until deadline, then kills the survivors
// and waits up to strayKillWait more for them. It runs once the covered groups are empty (or were
// killed at the deadline): the scan and the proofs then find only what left the groups, and do
// not compete for the CPU with the groups' own exits, the common case, which a sweep run beside
// them slowed by half (see BENCHMARKS.md). A stray's SIGTERM comes that much later, within the
// grace all the same.
func (e *envSweep) finish(deadline time.Time, log *slog.Logger) {
	e.signal(unix.SIGTERM, log)
	if e.strays == nil {
		return
	}
	defer e.strays.Close()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err := e.strays.Wait(ctx)
	cancel()
	if err == nil {
		return
	}
	e.signal(unix.SIGKILL, log)
	ctx, cancel = context.WithTimeout(context.Background(), strayKillWait)
	defer cancel()
	if err := e.strays.Wait(ctx); err != nil {
		log.Warn("supervise: environment sweep", "err", err)
	}
}

// strayKillWait bounds the wait for strays after their SIGKILL.
const strayKillWait = time.Second
