//go:build linux || darwin

package supervise

import (
	"log/slog"
	"path/filepath"

	"github.com/custody-dev/custody/internal/sockdir"
)

// A nest directory (see nestPathLocked) is locked (sockdir.Lock) for as long as any process may
// still listen or dial there: each supervisor holds a lock on it from before it listens until it
// exits, and the owner holds one from its supervisor's readiness until it lets the name go (an
// idle release, Close). A directory nobody locks is garbage: its supervisor and its owner are
// both gone (killed together: a container's or a CI job's whole tree SIGKILLed), and no process
// will use its name again. Each supervisor that makes a nest sweeps such directories from the
// temporary directory once it is ready (sweepNestDirs).

// nestPrefix starts the name of every nest directory.
const nestPrefix = "custody-nest-"

// supervisorNest is the lock of this supervisor's nest directory: held for the life of the
// process, and so dropped by the kernel only as it exits, after closeNest has removed the
// directory.
var supervisorNest *sockdir.Lock

// sweepNestDirs removes from tmp every nest directory that nobody locks, but own, and returns the
// paths it removed.
func sweepNestDirs(tmp, own string) []string { return sockdir.Sweep(tmp, nestPrefix, own) }

// sweepNestDirsAfter sweeps the nest directories beside the one at own (a socket path) and logs
// what it removed.
func sweepNestDirsAfter(own string, log *slog.Logger) {
	dir := filepath.Dir(own)
	removed := sweepNestDirs(filepath.Dir(dir), filepath.Base(dir))
	if len(removed) > 0 {
		log.Debug("supervise: removed nest directories nobody holds", "dirs", removed)
	}
}
