package ledger

import (
	"strings"
	"time"

	"github.com/custody-dev/custody/procid"
)

// ArgvTokens is how many argv tokens a row keeps (the Hermes rule).
const ArgvTokens = 10

// NewRow describes the live process inc, started by spawner (zero when none is recorded), for a
// row: its exact start, its pidfs id when inc has one ([procid.ReadExact]), its epoch start, its
// boot, and its first argv tokens.
// Purpose, install, host, port and custody's scope fields are the caller's to set.
func NewRow(inc procid.Incarnation, spawner procid.Incarnation) Row {
	r := newRow(inc, spawner)
	if argv, err := procid.Cmdline(inc.PID); err == nil {
		r.Argv = JoinArgv(argv)
	}
	return r
}

func newRow(inc, spawner procid.Incarnation) Row {
	r := Row{
		PID:          inc.PID,
		CreateTime:   ptr(inc.CreateTime),
		RegisteredAt: float64(time.Now().UnixNano()) / 1e9,
		StartTicks:   ptr(inc.Start),
	}
	if inc.BootID != "" {
		r.BootID = ptr(inc.BootID)
		r.BootStart = ptr(inc.BootStart)
		if inc.PidfdID != 0 { // ids count from each boot: one is recorded only with its boot
			r.PidfdID = ptr(inc.PidfdID)
		}
	}
	if spawner.PID > 0 {
		r.SpawnerPID = ptr(spawner.PID)
		r.SpawnerCreate = ptr(spawner.CreateTime)
		r.SpawnerStartTicks = ptr(spawner.Start)
		if spawner.BootID != "" {
			r.SpawnerBoot = ptr(spawner.BootStart)
			if spawner.PidfdID != 0 {
				r.SpawnerPidfdID = ptr(spawner.PidfdID)
			}
		}
	}
	if inc.PGID > 0 {
		r.PGID = ptr(inc.PGID)
	}
	return r
}

// NewChildRow is [NewRow] for a child the caller has just started with argv: the row's argv is
// taken from argv rather than read back from the OS, which is the same after the exec and saves a
// read on the start's path.
func NewChildRow(inc, spawner procid.Incarnation, argv []string) Row {
	r := newRow(inc, spawner)
	r.Argv = JoinArgv(argv)
	return r
}

// JoinArgv keeps the first [ArgvTokens] tokens joined by spaces.
func JoinArgv(argv []string) string {
	return strings.Join(argv[:min(len(argv), ArgvTokens)], " ")
}

func ptr[T any](v T) *T { return &v }
