package ledger

import (
	"encoding/json"
	"fmt"

	"github.com/custody-dev/custody/internal/jsonscan"
	"github.com/custody-dev/custody/internal/scopedesc"
	"github.com/custody-dev/custody/procid"
)

// Row is one registered process. The first group of fields keep the meaning they have in the
// Hermes spawn-ledger.json; the second are custody's own. A nil pointer is a field that is null
// or absent in the file. Rows read from the file keep their original bytes: they are written back
// unchanged unless [Row.Set] changes them, so fields custody does not know survive a rewrite.
type Row struct {
	PID           int      `json:"pid"`
	CreateTime    *float64 `json:"create_time"`
	Purpose       string   `json:"purpose"`
	Install       string   `json:"install"`
	SpawnerPID    *int     `json:"spawner_pid"`
	SpawnerCreate *float64 `json:"spawner_create"`
	RegisteredAt  float64  `json:"registered_at"`
	Argv          string   `json:"argv"`
	Host          string   `json:"host"`
	Port          *int     `json:"port"`
	Profile       string   `json:"profile"`
	HermesHome    string   `json:"hermes_home"`
	Isolated      bool     `json:"isolated"`
	BootStart     *float64 `json:"boot_start"`
	SpawnerBoot   *float64 `json:"spawner_boot"`
	BootID        *string  `json:"boot_id"`

	StartTicks        *uint64 `json:"start_ticks,omitempty"`         // exact start, OS-native unit (see procid)
	SpawnerStartTicks *uint64 `json:"spawner_start_ticks,omitempty"` // the spawner's exact start
	PidfdID           *uint64 `json:"pidfd_id,omitempty"`            // pidfs id under boot_id (Linux 6.9+; see procid)
	SpawnerPidfdID    *uint64 `json:"spawner_pidfd_id,omitempty"`    // the spawner's pidfs id
	PGID              *int    `json:"pgid,omitempty"`                // process group, when the row's scope is one
	Scope             string  `json:"scope,omitempty"`               // "pgrp", "cgroup", "job", or "" for the process alone
	Reapable          *bool   `json:"reapable,omitempty"`            // reap may stop it once its spawner is dead
	Generation        *int    `json:"generation,omitempty"`          // generation of a restartable slot
	Owner             *int    `json:"owner,omitempty"`               // PID of the owner holding its supervisor
	Containment       string  `json:"containment,omitempty"`         // "cgroup", "process-group" or "job"
	Cgroup            string  `json:"cgroup,omitempty"`              // a cgroup scope's hierarchy path
	CgroupID          *uint64 `json:"cgroup_id,omitempty"`           // its inode number (the kernel's cgroup id)
	ScopeID           string  `json:"scope_id,omitempty"`            // the scope's id in its processes' environment (scope.EnvScopeID)
	CgroupVia         string  `json:"cgroup_via,omitempty"`          // how the cgroup was had: "systemd-scope", "systemd-service", or "" (custody's own subtree)
	CallerPID         *int    `json:"caller_pid,omitempty"`          // the process the owner serves: its end ends the child
	CallerStartTicks  *uint64 `json:"caller_start_ticks,omitempty"`  // its exact start, as start_ticks

	raw []byte // the row as read, written back verbatim while unchanged
	// identityOnly: decoded from raw with the identity fields only, as the write path reads, and
	// unchanged by Set since (see snapshotRows).
	identityOnly bool
	foreign      bool // raw has a field custody does not know
}

// Record returns what the row remembers of its process's incarnation.
func (r Row) Record() procid.Record {
	return procid.Record{PID: r.PID, StartTicks: r.StartTicks, BootID: r.BootID, BootStart: r.BootStart,
		CreateTime: r.CreateTime, PidfdID: r.PidfdID}
}

// ScopeDesc returns what the row records of its process's scope, for scope.Open. Rows written
// by other programs describe none (Kind "").
func (r Row) ScopeDesc() scopedesc.Desc {
	d := scopedesc.Desc{Kind: scopedesc.Kind(r.Scope), Leader: procid.ID{PID: r.PID}, Cgroup: r.Cgroup}
	if r.StartTicks != nil {
		d.Leader.Start = *r.StartTicks
	}
	d.Leader.PidfdID = r.Record().PidfsID()
	if r.PGID != nil {
		d.PGID = *r.PGID
	}
	if r.CgroupID != nil {
		d.CgroupID = *r.CgroupID
	}
	return d
}

// SetScope records the scope d describes (its leader is the row's process): the row's scope,
// containment, process group and cgroup.
func (r *Row) SetScope(d scopedesc.Desc) {
	r.Scope, r.Containment = string(d.Kind), d.Kind.Containment()
	if d.PGID > 0 {
		r.PGID = &d.PGID
	}
	if d.Cgroup != "" {
		r.Cgroup, r.CgroupID = d.Cgroup, &d.CgroupID
	}
}

// SpawnerRecord returns what the row remembers of its spawner's incarnation. Its PID is 0 when no
// spawner was recorded.
func (r Row) SpawnerRecord() procid.Record {
	rec := procid.Record{StartTicks: r.SpawnerStartTicks, BootID: r.BootID, BootStart: r.SpawnerBoot,
		CreateTime: r.SpawnerCreate, PidfdID: r.SpawnerPidfdID}
	if r.SpawnerPID != nil {
		rec.PID = *r.SpawnerPID
	}
	return rec
}

// Set changes one field of the row, known to custody or not, to the JSON encoding of v; every
// other field keeps its bytes. The typed view is updated too.
func (r *Row) Set(key string, v any) error {
	val, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("ledger: set %s: %w", key, err)
	}
	if err := r.edit(key, func(fields map[string]json.RawMessage) { fields[key] = val }); err != nil {
		return fmt.Errorf("ledger: set %s: %w", key, err)
	}
	r.decodeField(key, val, nil)
	return nil
}

// Delete removes the field named key from the row, as if it had never been written; a row
// without it is unchanged.
func (r *Row) Delete(key string) error {
	if err := r.edit(key, func(fields map[string]json.RawMessage) { delete(fields, key) }); err != nil {
		return fmt.Errorf("ledger: delete %s: %w", key, err)
	}
	r.decodeField(key, []byte("null"), nil)
	return nil
}

// edit applies change to the row's fields, keeping every other field as it is written.
func (r *Row) edit(key string, change func(map[string]json.RawMessage)) error {
	fields := map[string]json.RawMessage{}
	src := r.raw
	var err error
	if src == nil {
		if src, err = json.Marshal(r); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(src, &fields); err != nil {
		return err
	}
	change(fields)
	if r.raw, err = json.Marshal(fields); err != nil {
		return err
	}
	r.identityOnly = false
	return nil
}

// Decoded returns the row with every field decoded from its bytes (rows given to
// [Ledger.Update] carry only their identity fields). A row never written has nothing to decode
// and is returned as it is.
func (r Row) Decoded() Row {
	if r.raw == nil {
		return r
	}
	full, _ := decodeRow(r.raw, decodeFull, nil)
	return full
}

// Foreign reports whether the row has a field that custody does not know, one that another
// program (or a later custody) wrote: a row without one holds no field but those of [Row].
func (r Row) Foreign() bool { return r.foreign }

// Raw returns the row's JSON encoding: its original bytes while unchanged.
func (r Row) Raw() ([]byte, error) {
	if r.raw != nil {
		return r.raw, nil
	}
	return encodeRow(r)
}

// decodeRow decodes one array element, which [jsonscan.Array] has validated. ok is false for a
// malformed row: not an object, or without a positive integer pid. Fields of an unexpected type
// read as absent but keep their bytes. raw is kept as given: the caller owns it.
//
// Only the fields of the decoding are decoded: a write at 1,000 rows cannot afford to unescape
// every row's strings it will write back as bytes anyway (decodeIdentity), nor a liveness query
// the fields it never looks at (decodeJudge). The values the row's pointers point to are kept in
// vals (see values), which may be nil.
func decodeRow(raw []byte, d decoding, vals *values) (r Row, ok bool) {
	ok = r.decodeFrom(raw, d, vals)
	return r, ok
}

// decodeFrom is decodeRow into r, which is zero.
func (r *Row) decodeFrom(raw []byte, d decoding, vals *values) bool {
	wellTyped := true
	isObj := jsonscan.Members(raw, func(k, v []byte) bool {
		switch f := fieldOf(k); {
		case f == fieldUnknown:
			r.foreign = true
		case f.identityNumber() && d.has(f):
			if !r.decodeNumber(f, v, vals) && !numberOrNull(v) {
				wellTyped = false
			}
		case f.identityNumber():
			wellTyped = wellTyped && numberOrNull(v)
		case d.has(f):
			r.decode(f, v, vals)
		}
		return true
	})
	r.raw = raw
	r.identityOnly = d == decodeIdentity
	return isObj && wellTyped && r.PID > 0
}

// decodeNumber decodes an identity number, and reports whether v was one: a number decoded
// needs no second parse to be known as one.
func (r *Row) decodeNumber(f field, v []byte, vals *values) bool {
	switch f {
	case fieldPID:
		n, ok := jsonscan.Int(v)
		if ok && n > 0 && n <= maxPID {
			r.PID = int(n)
		}
		return ok
	case fieldCreateTime:
		r.CreateTime = floatPtr(v, vals)
		return r.CreateTime != nil
	case fieldBootStart:
		r.BootStart = floatPtr(v, vals)
		return r.BootStart != nil
	case fieldStartTicks:
		r.StartTicks = uintPtr(v, vals)
		return r.StartTicks != nil
	}
	return false
}

// numberOrNull reports whether v is a finite JSON number or null.
func numberOrNull(v []byte) bool {
	_, ok := jsonscan.Float(v)
	return ok || jsonscan.IsNull(v)
}

// decodeField decodes the field named key.
func (r *Row) decodeField(key string, v []byte, vals *values) {
	if f := fieldOf([]byte(key)); f != fieldUnknown {
		r.decode(f, v, vals)
	} else {
		r.foreign = true
	}
}

func (r *Row) decode(f field, v []byte, vals *values) {
	switch f {
	case fieldPID, fieldCreateTime, fieldBootStart, fieldStartTicks:
		r.decodeNumber(f, v, vals)
	case fieldPurpose:
		r.Purpose, _ = jsonscan.String(v)
	case fieldInstall:
		r.Install, _ = jsonscan.String(v)
	case fieldSpawnerPID:
		r.SpawnerPID = intPtr(v, vals)
	case fieldSpawnerCreate:
		r.SpawnerCreate = floatPtr(v, vals)
	case fieldRegisteredAt:
		r.RegisteredAt, _ = jsonscan.Float(v)
	case fieldArgv:
		r.Argv, _ = jsonscan.String(v)
	case fieldHost:
		r.Host, _ = jsonscan.String(v)
	case fieldPort:
		r.Port = intPtr(v, vals)
	case fieldProfile:
		r.Profile, _ = jsonscan.String(v)
	case fieldHermesHome:
		r.HermesHome, _ = jsonscan.String(v)
	case fieldIsolated:
		r.Isolated, _ = jsonscan.Bool(v)
	case fieldSpawnerBoot:
		r.SpawnerBoot = floatPtr(v, vals)
	case fieldBootID:
		r.BootID = vals.bootID(v)
	default:
		r.decodeCustodyField(f, v, vals)
	}
}

func (r *Row) decodeCustodyField(f field, v []byte, vals *values) {
	switch f {
	case fieldSpawnerStartTicks:
		r.SpawnerStartTicks = uintPtr(v, vals)
	case fieldPidfdID:
		r.PidfdID = idPtr(v, vals)
	case fieldSpawnerPidfdID:
		r.SpawnerPidfdID = idPtr(v, vals)
	case fieldPGID:
		r.PGID = intPtr(v, vals)
	case fieldScope:
		r.Scope, _ = jsonscan.String(v)
	case fieldReapable:
		if b, ok := jsonscan.Bool(v); ok {
			r.Reapable = &b
		}
	case fieldGeneration:
		r.Generation = intPtr(v, vals)
	case fieldOwner:
		r.Owner = intPtr(v, vals)
	case fieldContainment:
		r.Containment, _ = jsonscan.String(v)
	case fieldCgroup:
		r.Cgroup, _ = jsonscan.String(v)
	case fieldCgroupID:
		r.CgroupID = uintPtr(v, vals)
	case fieldScopeID:
		r.ScopeID, _ = jsonscan.String(v)
	case fieldCgroupVia:
		r.CgroupVia, _ = jsonscan.String(v)
	case fieldCallerPID:
		r.CallerPID = intPtr(v, vals)
	case fieldCallerStartTicks:
		r.CallerStartTicks = uintPtr(v, vals)
	}
}

// maxPID bounds PIDs: pid_t is 32-bit on every OS custody supports, and a larger value would
// truncate to another process's PID (or to -1, every process) in a system call.
const maxPID = 1<<31 - 1

// intPtr accepts a JSON number that is an integer within pid_t's range; 12.0 is 12, 12.5 and
// "12" are not integers.
func intPtr(v []byte, vals *values) *int {
	n, ok := jsonscan.Int(v)
	if !ok || n < -maxPID || n > maxPID {
		return nil
	}
	return vals.int(int(n))
}

func uintPtr(v []byte, vals *values) *uint64 {
	n, ok := jsonscan.Int(v)
	if !ok || n < 0 {
		return nil
	}
	return vals.uint(uint64(n))
}

// idPtr accepts a pidfs id: a positive integer. Anything else (0, negative, fractional, a string)
// is no id, so the row falls back to its start ticks; it can never be taken for a match.
func idPtr(v []byte, vals *values) *uint64 {
	n, ok := jsonscan.Int(v)
	if !ok || n <= 0 {
		return nil
	}
	return vals.uint(uint64(n))
}

func floatPtr(v []byte, vals *values) *float64 {
	f, ok := jsonscan.Float(v)
	if !ok {
		return nil
	}
	return vals.float(f)
}

// Reparse decodes one row from its JSON bytes (for example a row of `custody ps --json`).
func Reparse(raw []byte) (Row, error) {
	var r Row
	var ok bool
	err := jsonscan.Array(append(append([]byte("["), raw...), ']'), func(elem []byte) error {
		r, ok = decodeRow(elem, decodeFull, nil)
		return nil
	})
	switch {
	case err != nil:
		return Row{}, fmt.Errorf("ledger: row is not valid JSON")
	case !ok:
		return Row{}, fmt.Errorf("ledger: row is not an object with a positive pid")
	}
	return r, nil
}
