package procid

import (
	"errors"
	"fmt"
	"math"
)

// State is three-valued liveness. The zero value is [Unknown], so a forgotten assignment never
// reads as a verdict.
type State int

const (
	Unknown State = iota // the process could not be read or the record cannot be proven either way
	Alive                // the PID names the recorded incarnation now
	Dead                 // the recorded incarnation is provably gone
)

func (s State) String() string {
	switch s {
	case Alive:
		return "alive"
	case Dead:
		return "dead"
	default:
		return "unknown"
	}
}

// MarshalText makes a State read as its word in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Proof says how strongly a live process matched a [Record].
type Proof int

const (
	NoProof    Proof = iota // not alive, or alive only under the lenient null-create-time rule
	EpochProof              // epoch start within [EpochTolerance] of a non-null recorded create time
	ExactProof              // same boot id and same exact start
)

// Record is what a ledger row remembers of an incarnation. Any field may be missing (rows written
// by other programs): nil means not recorded.
type Record struct {
	PID        int
	StartTicks *uint64  // exact start in the OS-native unit
	BootID     *string  // Linux boot id under which StartTicks counts
	BootStart  *float64 // start in seconds since boot (Hermes's boot_start: ticks / CLK_TCK)
	CreateTime *float64 // epoch seconds
	PidfdID    *uint64  // pidfs id (Linux 6.9+) under BootID; see [ID.PidfdID]
}

// Check decides a record's liveness from a fresh read, by the identity rules:
//   - a record from another boot is dead, without reading the process;
//   - a missing process or a zombie is dead; an unreadable one is unknown;
//   - with a pidfs id recorded under this boot and one read, equal is alive, different is dead
//     (a PID recycled within its holder's start tick is told apart only this way);
//   - with an exact start recorded (start ticks, or boot_start, under the same boot), equal is
//     alive, different is dead;
//   - otherwise, with a create time recorded, |live-recorded| < 2 s is alive, else dead;
//   - with neither, the live process matches only when strict is false (never for a kill).
func (r Record) Check(strict bool) (State, Proof) { return Reads{}.Check(r, strict) }

// Judge is [Record.Check] on a read already made: inc and err are what [Read] returned for
// r.PID. It lets a caller read each PID once when many records name it. It does not compare boot
// ids for records without a read; Check does.
func (r Record) Judge(inc Incarnation, err error, strict bool) (State, Proof) {
	if errors.Is(err, ErrGone) {
		return Dead, NoProof
	}
	if err != nil {
		return Unknown, NoProof
	}
	return r.match(inc, strict)
}

func (r Record) match(inc Incarnation, strict bool) (State, Proof) {
	if id := r.pidfs(inc.BootID); id != 0 && inc.PidfdID != 0 {
		if id == inc.PidfdID {
			return Alive, ExactProof
		}
		return Dead, NoProof
	}
	// An exact start proves only under the same boot; a record without a boot id on a system that
	// has one could come from an earlier boot, so it falls through to the epoch rule.
	if r.StartTicks != nil && (r.BootID != nil || inc.BootID == "") {
		if *r.StartTicks == inc.Start {
			return Alive, ExactProof
		}
		return Dead, NoProof
	}
	// Rows written by psutil users carry boot_start, ticks/CLK_TCK rounded to a float: distinct
	// ticks are at least 1/CLK_TCK (≥ 1 ms) apart, so a sub-millisecond difference is the same tick.
	if r.BootStart != nil && r.BootID != nil && inc.BootID != "" {
		if math.Abs(*r.BootStart-inc.BootStart) < 0.0005 {
			return Alive, ExactProof
		}
		return Dead, NoProof
	}
	if r.CreateTime != nil {
		if EpochMatch(inc.CreateTime, *r.CreateTime) {
			return Alive, EpochProof
		}
		return Dead, NoProof
	}
	if strict {
		return Unknown, NoProof
	}
	return Alive, NoProof
}

// PidfsID returns the record's pidfs id when it can prove anything on this boot (see pidfs), and
// 0 otherwise.
func (r Record) PidfsID() uint64 { return r.pidfs(bootOrNone()) }

// pidfs returns the record's pidfs id when it may be compared under boot: positive (anything else
// a row may hold is no id, never a match) and recorded under that boot, since the ids count
// afresh from every boot. It returns 0 otherwise.
func (r Record) pidfs(boot string) uint64 {
	if r.PidfdID == nil || *r.PidfdID == 0 || r.BootID == nil || boot == "" || *r.BootID != boot {
		return 0
	}
	return *r.PidfdID
}

func (r Record) String() string { return fmt.Sprintf("pid %d", r.PID) }

// Same reports whether two records provably name one incarnation: the identity rule for
// comparing what was recorded with what was recorded (a ledger row with a new row for its PID,
// a receipt with the child a giver holds), as [Record.Check] is for comparing a record with a
// live process. Records under two boots never match. Where both carry a pidfs id under one boot,
// it decides: equal start ticks cannot tell apart a PID recycled within its holder's start tick.
// Otherwise the exact start decides (start ticks, or boot_start under one named boot). An epoch
// create time within [EpochTolerance] is never enough: a PID recycled within those seconds
// would be taken for its previous holder.
func (r Record) Same(o Record) bool {
	if r.PID != o.PID {
		return false
	}
	if r.BootID != nil && o.BootID != nil && *r.BootID != *o.BootID {
		return false
	}
	if r.PidfdID != nil && o.PidfdID != nil && *r.PidfdID != 0 && *o.PidfdID != 0 && r.BootID != nil && o.BootID != nil {
		return *r.PidfdID == *o.PidfdID // 0 is no id (see pidfs)
	}
	switch {
	case r.StartTicks != nil && o.StartTicks != nil:
		return *r.StartTicks == *o.StartTicks
	case r.BootStart != nil && o.BootStart != nil && r.BootID != nil && o.BootID != nil:
		return *r.BootStart == *o.BootStart
	}
	return false
}
