// Package reap stops what crashed sessions left behind, only with proof. A row is reaped when it
// is reapable, its own identity is proven now, its spawner was recorded and is provably dead, it
// is neither the reaper nor one of its ancestors (nor init, nor a kernel thread), and it runs as
// the ledger's owner. Unknown anywhere means keep. Every decision carries its reason.
//
// The rules are never wider than the sweep of Hermes, the other program that shares the ledger: a
// row without a recorded spawner is never reaped, whatever its age or parent, since Hermes keeps
// such rows (an mcp-helper whose spawner went unrecorded, a serve started by hand).
package reap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/stop"
)

// DefaultPurposes are reapable when a row has no reapable field (rows of other programs).
var DefaultPurposes = []string{"serve", "dashboard", "gateway", "mcp-helper"}

// Action is what reap does with a row.
type Action string

const (
	Reap Action = "reap" // stopped (or, in a dry run, would be)
	Keep Action = "keep" // left alone; Reason says why
	Gone Action = "gone" // its process had already exited; the row is dropped
)

// Reason words are stable: programs read them from `custody reap --json`.
const (
	SpawnerDead      = "spawner-dead"
	AlreadyExited    = "already-exited"    // the row's process is provably gone
	PIDReused        = "pid-reused"        // its PID now names another process, which is left alone
	OtherBoot        = "other-boot"        // recorded under another boot: dead by rule
	NotReapable      = "not-reapable"      // reapable false, or no field and a purpose not in DefaultPurposes
	IdentityUnproven = "identity-unproven" // its process could not be proven to be the recorded one
	SpawnerAlive     = "spawner-alive"
	SpawnerUnknown   = "spawner-unknown"  // the spawner could not be read or proven either way
	NoSpawner        = "no-spawner"       // no spawner was recorded: never reaped
	SelfOrAncestor   = "self-or-ancestor" // the reaper, one of its ancestors, or init
	KernelThread     = "kernel-thread"
	OtherUser        = "other-user" // it runs as another user than the ledger's owner
	OwnerDead        = "owner-dead" // a dead owner's empty cgroups: removed
	Populated        = "populated"  // a dead owner's cgroup still has processes: see their rows
	// NotInLedger: a dead owner's cgroup directory that no row considered names (another
	// session's, with another ledger, or another install's under --install): left alone, reported
	NotInLedger = "not-in-ledger"
)

// Decision is reap's verdict on one row.
type Decision struct {
	PID     int          `json:"pid"`
	Purpose string       `json:"purpose"`
	Action  Action       `json:"action"`
	Reason  string       `json:"reason"`
	Result  *stop.Result `json:"result,omitempty"` // the stop's outcome, when reaped for real
	// Cgroup, on a decision about a dead owner's directory of cgroup scopes rather than a row,
	// is that directory (PID is then the dead owner's).
	Cgroup string `json:"cgroup,omitempty"`
	row    *ledger.Row
}

// Decide judges every row, as rows of a ledger the caller owns. It reads each PID at most once,
// spreading the reads over the CPUs.
func Decide(rows []ledger.Row) []Decision { return decide(rows, os.Getuid()) }

// decide is Decide for rows of a ledger owned by uid owner: a row to reap whose process runs as
// another user is kept (OtherUser), since stopping it would be refused anyway.
func decide(rows []ledger.Row, owner int) []Decision {
	recs := make([]procid.Record, 0, 2*len(rows))
	for _, r := range rows {
		recs = append(recs, r.Record())
		if r.SpawnerPID != nil {
			recs = append(recs, r.SpawnerRecord())
		}
	}
	j := judge{reads: procid.ReadRecords(recs), guard: authority.NewGuard()}
	out := make([]Decision, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		action, reason := j.decide(*r)
		if action == Reap {
			if a, why := ownedBy(r.PID, owner, action, reason); a != Gone || !sweepable(*r) {
				action, reason = a, why
			}
		}
		out = append(out, Decision{PID: r.PID, Purpose: r.Purpose, Action: action, Reason: reason, row: r})
	}
	return out
}

// Options tunes [Run].
type Options struct {
	DryRun  bool
	Install string       // only rows of this install; empty means every row
	Stop    stop.Options // how each reaped row is stopped
}

// Run decides, stops each row to reap as `custody stop` would (its scope, through proven
// authority), and drops from the ledger the rows whose process is provably gone. A dry run
// signals nothing and changes nothing, and reports the same decisions.
func Run(ctx context.Context, l *ledger.Ledger, opts Options) ([]Decision, error) {
	rows, err := l.Rows(ctx)
	if _, ok := errors.AsType[*ledger.CorruptError](err); ok && !opts.DryRun {
		// A reap writes the ledger, and a writer quarantines a corrupt file (a read leaves it).
		rep, uerr := l.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) { return rows, nil })
		if uerr == nil && rep.Quarantined != nil {
			err = rep.Quarantined
		}
	}
	if err != nil {
		return nil, err
	}
	if opts.Stop.Owner == nil {
		uid, err := l.Owner()
		if err != nil {
			return nil, err
		}
		opts.Stop.Owner = &uid
	}
	if opts.Install != "" {
		rows = slices.DeleteFunc(rows, func(r ledger.Row) bool { return r.Install != opts.Install })
	}
	ds := decide(rows, *opts.Stop.Owner)
	named := namedOwners(rows) // before the rows are reaped and dropped
	if opts.DryRun {
		return append(ds, leftovers(true, named)...), nil
	}
	var drop []ledger.Row
	for i := range ds {
		d := &ds[i]
		if ctx.Err() != nil { // SIGINT or SIGTERM to the reaper: signal nothing more
			return ds, errors.Join(fmt.Errorf("reap: %w", context.Cause(ctx)), l.Drop(context.WithoutCancel(ctx), drop))
		}
		switch d.Action {
		case Reap:
			so := opts.Stop
			so.ScopeID = d.row.Decoded().ScopeID
			res := stop.Recorded(ctx, d.row.Record(), d.row.ScopeDesc(), so)
			d.Result = &res
			if res.OK() {
				drop = append(drop, *d.row)
			}
		case Gone:
			drop = append(drop, *d.row)
		}
	}
	err = l.Drop(ctx, drop)
	return append(ds, leftovers(false, named)...), err
}

// owners tells which dead owners' cgroup directories the rows considered name (see namedOwners).
type owners struct {
	dirs []string         // the cgroup scopes the rows record
	ids  map[int][]uint64 // owner and spawner PIDs, with their start ticks where recorded (0: none)
}

// namedOwners collects what ties rows to an owner's cgroup directory: a row's cgroup inside it,
// or the owner it names (its owner or its spawner, the one that started it) being the
// directory's, under the recorded start where there is one.
func namedOwners(rows []ledger.Row) owners {
	o := owners{ids: map[int][]uint64{}}
	for _, r := range rows {
		if r.Cgroup != "" {
			o.dirs = append(o.dirs, r.Cgroup)
		}
		if r.Owner != nil {
			o.ids[*r.Owner] = append(o.ids[*r.Owner], 0)
		}
		if r.SpawnerPID != nil {
			var start uint64
			if r.SpawnerStartTicks != nil {
				start = *r.SpawnerStartTicks
			}
			o.ids[*r.SpawnerPID] = append(o.ids[*r.SpawnerPID], start)
		}
	}
	return o
}

// names reports whether the rows name the leftover directory l.
func (o owners) names(l scope.Leftover) bool {
	for _, d := range o.dirs {
		if strings.HasPrefix(d, l.Cgroup+"/") {
			return true
		}
	}
	for _, start := range o.ids[l.Owner.PID] {
		if start == 0 || start == l.Owner.Start {
			return true
		}
	}
	return false
}

// leftovers decides on the cgroup directories of dead owners, after the rows were reaped (which
// empties the scopes the rows name): empty ones are removed, populated ones kept. A scope that no
// reapable row names is never killed here: its processes may be rows kept on purpose. A
// directory no row names is another session's (another ledger's, or another install's under
// --install): it is reported apart (NotInLedger) and left to the reap of the ledger that names
// it, or to its own supervisor.
func leftovers(dryRun bool, named owners) []Decision {
	ls, err := scope.Leftovers()
	if err != nil {
		return nil
	}
	var out, apart []Decision
	for _, l := range ls {
		d := Decision{PID: l.Owner.PID, Cgroup: l.Cgroup, Action: Gone, Reason: OwnerDead}
		switch {
		case !named.names(l):
			d.Action, d.Reason = Keep, NotInLedger
			apart = append(apart, d)
			continue
		case l.Populated:
			d.Action, d.Reason = Keep, Populated
		case !dryRun:
			if scope.RemoveLeftover(l) != nil {
				d.Action, d.Reason = Keep, Populated // a process entered it meanwhile
			}
		}
		out = append(out, d)
	}
	return append(out, apart...)
}

// ownedBy keeps a row to reap whose process does not run as owner alone: the stop would refuse
// it ([authority.CheckOwner]), and a dry run must say what a reap would do.
func ownedBy(pid, owner int, action Action, reason string) (Action, string) {
	ids, err := procid.Owner(pid)
	switch {
	case errors.Is(err, errors.ErrUnsupported): // Windows: no uids; OpenProcess decides
	case errors.Is(err, procid.ErrGone):
		return Gone, AlreadyExited
	case err != nil:
		return Keep, IdentityUnproven
	case !ids.Only(owner):
		return Keep, OtherUser
	}
	return action, reason
}

type judge struct {
	reads procid.Reads
	guard authority.Guard
}

// check proves strictly: reaping acts on what it proves.
func (j *judge) check(rec procid.Record) (procid.State, procid.Proof) {
	return j.reads.Check(rec, true)
}

// decide applies the reaping rules in order; the first that fails names the reason.
func (j *judge) decide(r ledger.Row) (Action, string) {
	if pe, ok := errors.AsType[*authority.ProtectedError](j.guard.Refuse(r.PID)); ok {
		if pe.What == authority.KernelThread {
			return Keep, KernelThread
		}
		return Keep, SelfOrAncestor // init is every process's ancestor
	}
	if r.BootID != nil {
		if boot, err := procid.BootID(); err == nil && boot != *r.BootID {
			return Gone, OtherBoot
		}
	}
	state, proof := j.check(r.Record())
	switch {
	case state == procid.Dead && j.reads.Get(r.PID).Err == nil:
		return Keep, PIDReused // the row is dead, but say so rather than drop it silently
	case state == procid.Dead:
		if action, reason, ok := j.strays(r); ok {
			return action, reason
		}
		return Gone, AlreadyExited
	case state != procid.Alive || proof == procid.NoProof:
		return Keep, IdentityUnproven
	case !reapable(r):
		return Keep, NotReapable
	}
	spawner := r.SpawnerRecord()
	if spawner.PID <= 0 {
		return Keep, NoSpawner
	}
	switch s, _ := j.check(spawner); s {
	case procid.Dead:
		return Reap, SpawnerDead
	case procid.Alive:
		return Keep, SpawnerAlive
	}
	return Keep, SpawnerUnknown
}

func reapable(r ledger.Row) bool {
	if r.Reapable != nil {
		return *r.Reapable
	}
	return slices.Contains(DefaultPurposes, r.Purpose)
}
