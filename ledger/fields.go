package ledger

// field is a field of [Row], by its JSON name, or fieldUnknown for any other name.
type field uint8

const (
	fieldUnknown field = iota
	fieldPID
	fieldCreateTime
	fieldPurpose
	fieldInstall
	fieldSpawnerPID
	fieldSpawnerCreate
	fieldRegisteredAt
	fieldArgv
	fieldHost
	fieldPort
	fieldProfile
	fieldHermesHome
	fieldIsolated
	fieldBootStart
	fieldSpawnerBoot
	fieldBootID
	fieldStartTicks
	fieldSpawnerStartTicks
	fieldPidfdID
	fieldSpawnerPidfdID
	fieldPGID
	fieldScope
	fieldReapable
	fieldGeneration
	fieldOwner
	fieldContainment
	fieldCgroup
	fieldCgroupID
	fieldScopeID
	fieldCgroupVia
	fieldCallerPID
	fieldCallerStartTicks

	numFields // not a field: how many there are, fieldUnknown included
)

// A decoding has one bit a field: a field past its width would silently never decode. This fails
// to compile once there are more fields than bits.
var _ [64 - numFields]struct{}

// fieldOf names the field key is the JSON name of: one comparison of the name per field of a row
// read, however many questions are then asked about the field.
func fieldOf(key []byte) field {
	switch string(key) {
	case "pid":
		return fieldPID
	case "create_time":
		return fieldCreateTime
	case "purpose":
		return fieldPurpose
	case "install":
		return fieldInstall
	case "spawner_pid":
		return fieldSpawnerPID
	case "spawner_create":
		return fieldSpawnerCreate
	case "registered_at":
		return fieldRegisteredAt
	case "argv":
		return fieldArgv
	case "host":
		return fieldHost
	case "port":
		return fieldPort
	case "profile":
		return fieldProfile
	case "hermes_home":
		return fieldHermesHome
	case "isolated":
		return fieldIsolated
	case "boot_start":
		return fieldBootStart
	case "spawner_boot":
		return fieldSpawnerBoot
	case "boot_id":
		return fieldBootID
	}
	return custodyFieldOf(key)
}

func custodyFieldOf(key []byte) field {
	switch string(key) {
	case "start_ticks":
		return fieldStartTicks
	case "spawner_start_ticks":
		return fieldSpawnerStartTicks
	case "pidfd_id":
		return fieldPidfdID
	case "spawner_pidfd_id":
		return fieldSpawnerPidfdID
	case "pgid":
		return fieldPGID
	case "scope":
		return fieldScope
	case "reapable":
		return fieldReapable
	case "generation":
		return fieldGeneration
	case "owner":
		return fieldOwner
	case "containment":
		return fieldContainment
	case "cgroup":
		return fieldCgroup
	case "cgroup_id":
		return fieldCgroupID
	case "scope_id":
		return fieldScopeID
	case "cgroup_via":
		return fieldCgroupVia
	case "caller_pid":
		return fieldCallerPID
	case "caller_start_ticks":
		return fieldCallerStartTicks
	}
	return fieldUnknown
}

// identityNumber reports whether a field names the row's process and must be a number (or null):
// a row whose create_time is NaN or a string names no process, and no read may take it for one
// whose identity is merely unrecorded.
func (f field) identityNumber() bool {
	return f == fieldPID || f == fieldCreateTime || f == fieldBootStart || f == fieldStartTicks
}

// decoding says which fields a read decodes from each row's bytes, one bit a field. Every row
// keeps all its bytes whatever the decoding: what is not decoded reads as absent, and
// [Row.Decoded] decodes it.
type decoding uint64

func fields(fs ...field) decoding {
	var d decoding
	for _, f := range fs {
		d |= 1 << f
	}
	return d
}

var (
	// decodeFull decodes every field.
	decodeFull = ^decoding(0)
	// decodeIdentity decodes what a write needs (see [Ledger.Update]): pruning proves identity,
	// and Drop and Same match registrations.
	decodeIdentity = fields(fieldPID, fieldCreateTime, fieldBootID, fieldBootStart, fieldStartTicks,
		fieldRegisteredAt, fieldPidfdID)
	// decodeJudge decodes what judging liveness needs (see [Ledger.Query]): the process's identity
	// ([Row.Record]), its spawner's ([Row.SpawnerRecord]), and the install a query may select by.
	decodeJudge = fields(fieldPID, fieldCreateTime, fieldBootID, fieldBootStart, fieldStartTicks,
		fieldPidfdID, fieldSpawnerPID, fieldSpawnerCreate, fieldSpawnerBoot, fieldSpawnerStartTicks,
		fieldSpawnerPidfdID, fieldInstall)
)

// has reports whether the decoding decodes the field.
func (d decoding) has(f field) bool { return d&(1<<f) != 0 }
