package ledger

import (
	"encoding/json"
	"fmt"

	"github.com/custody-dev/custody/internal/jsonscan"

	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
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

	raw []byte // the row as read, written back verbatim while unchanged
	// identityOnly: decoded from raw with the identity fields only, as the write path reads, and
	// unchanged by Set since (see snapshotRows).
	identityOnly bool
}

// decoding says which fields a read decodes from each row's bytes. Every row keeps all its
// bytes whatever the decoding: what is not decoded reads as absent, and [Row.Decoded] decodes it.
type decoding uint8

const (
	decodeFull     decoding = iota // every field
	decodeIdentity                 // what a write needs (see [Ledger.Update] and identityKey)
	decodeJudge                    // what judging liveness needs (see [Ledger.Query] and judgeKey)
)

// Record returns what the row remembers of its process's incarnation.
func (r Row) Record() procid.Record {
	return procid.Record{PID: r.PID, StartTicks: r.StartTicks, BootID: r.BootID, BootStart: r.BootStart,
		CreateTime: r.CreateTime, PidfdID: r.PidfdID}
}

// ScopeDesc returns what the row records of its process's scope, for [scope.Open]. Rows written
// by other programs describe none (Kind "").
func (r Row) ScopeDesc() scope.Desc {
	d := scope.Desc{Kind: scope.Kind(r.Scope), Leader: procid.ID{PID: r.PID}, Cgroup: r.Cgroup}
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
	fields := map[string]json.RawMessage{}
	src := r.raw
	if src == nil {
		if src, err = json.Marshal(r); err != nil {
			return fmt.Errorf("ledger: set %s: %w", key, err)
		}
	}
	if err := json.Unmarshal(src, &fields); err != nil {
		return fmt.Errorf("ledger: set %s: %w", key, err)
	}
	fields[key] = val
	if r.raw, err = json.Marshal(fields); err != nil {
		return fmt.Errorf("ledger: set %s: %w", key, err)
	}
	r.decodeField(key, val, nil)
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

// Raw returns the row's JSON encoding: its original bytes while unchanged.
func (r Row) Raw() ([]byte, error) {
	if r.raw != nil {
		return r.raw, nil
	}
	return json.Marshal(r)
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
	wellTyped := true
	isObj := jsonscan.Members(raw, func(k, v []byte) bool {
		if identityNumber(k) && !numberOrNull(v) {
			wellTyped = false
		}
		if d.has(k) {
			r.decodeField(string(k), v, vals)
		}
		return true
	})
	r.raw = raw
	r.identityOnly = d == decodeIdentity
	return r, isObj && wellTyped && r.PID > 0
}

// has reports whether the decoding decodes the field.
func (d decoding) has(k []byte) bool {
	switch d {
	case decodeIdentity:
		return identityKey(k)
	case decodeJudge:
		return judgeKey(k)
	}
	return true
}

// identityNumber reports whether a field names the row's process and must be a number (or null):
// a row whose create_time is NaN or a string names no process, and no read may take it for one
// whose identity is merely unrecorded.
func identityNumber(k []byte) bool {
	switch string(k) {
	case "pid", "create_time", "boot_start", "start_ticks":
		return true
	}
	return false
}

// numberOrNull reports whether v is a finite JSON number or null.
func numberOrNull(v []byte) bool {
	_, ok := jsonscan.Float(v)
	return ok || jsonscan.IsNull(v)
}

// identityKey reports whether a write needs the field: pruning proves identity, and Drop and
// Same match registrations.
func identityKey(k []byte) bool {
	switch string(k) {
	case "pid", "create_time", "boot_id", "boot_start", "start_ticks", "registered_at", "pidfd_id":
		return true
	}
	return false
}

// judgeKey reports whether judging a row's liveness and its spawner's needs the field: the
// process's identity (see [Row.Record]), the spawner's ([Row.SpawnerRecord]), and the install a
// query may select by.
func judgeKey(k []byte) bool {
	switch string(k) {
	case "pid", "create_time", "boot_id", "boot_start", "start_ticks", "pidfd_id",
		"spawner_pid", "spawner_create", "spawner_boot", "spawner_start_ticks", "spawner_pidfd_id",
		"install":
		return true
	}
	return false
}

func (r *Row) decodeField(key string, v []byte, vals *values) {
	switch key {
	case "pid":
		if n, ok := jsonscan.Int(v); ok && n > 0 && n <= maxPID {
			r.PID = int(n)
		}
	case "create_time":
		r.CreateTime = floatPtr(v, vals)
	case "purpose":
		r.Purpose, _ = jsonscan.String(v)
	case "install":
		r.Install, _ = jsonscan.String(v)
	case "spawner_pid":
		r.SpawnerPID = intPtr(v, vals)
	case "spawner_create":
		r.SpawnerCreate = floatPtr(v, vals)
	case "registered_at":
		r.RegisteredAt, _ = jsonscan.Float(v)
	case "argv":
		r.Argv, _ = jsonscan.String(v)
	case "host":
		r.Host, _ = jsonscan.String(v)
	case "port":
		r.Port = intPtr(v, vals)
	case "profile":
		r.Profile, _ = jsonscan.String(v)
	case "hermes_home":
		r.HermesHome, _ = jsonscan.String(v)
	case "isolated":
		r.Isolated, _ = jsonscan.Bool(v)
	case "boot_start":
		r.BootStart = floatPtr(v, vals)
	case "spawner_boot":
		r.SpawnerBoot = floatPtr(v, vals)
	case "boot_id":
		r.BootID = vals.bootID(v)
	default:
		r.decodeCustodyField(key, v, vals)
	}
}

func (r *Row) decodeCustodyField(key string, v []byte, vals *values) {
	switch key {
	case "start_ticks":
		r.StartTicks = uintPtr(v, vals)
	case "spawner_start_ticks":
		r.SpawnerStartTicks = uintPtr(v, vals)
	case "pidfd_id":
		r.PidfdID = idPtr(v, vals)
	case "spawner_pidfd_id":
		r.SpawnerPidfdID = idPtr(v, vals)
	case "pgid":
		r.PGID = intPtr(v, vals)
	case "scope":
		r.Scope, _ = jsonscan.String(v)
	case "reapable":
		if b, ok := jsonscan.Bool(v); ok {
			r.Reapable = &b
		}
	case "generation":
		r.Generation = intPtr(v, vals)
	case "owner":
		r.Owner = intPtr(v, vals)
	case "containment":
		r.Containment, _ = jsonscan.String(v)
	case "cgroup":
		r.Cgroup, _ = jsonscan.String(v)
	case "cgroup_id":
		r.CgroupID = uintPtr(v, vals)
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
