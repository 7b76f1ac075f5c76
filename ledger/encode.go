package ledger

import (
	"encoding/json"
	"math"
	"strconv"
)

// encodeRow returns r's JSON encoding, byte for byte what json.Marshal makes of it, without its
// reflection: a start encodes its row between the child's exec and its return, where
// json.Marshal's 5–10 µs were a tenth of what custody adds to a start. A value json.Marshal
// would refuse (a NaN or infinite time) or escape (any string byte outside printable ASCII, and
// the quote, backslash, <, > and &) goes through json.Marshal itself, which stays the definition:
// TestEncodeRow compares the two.
func encodeRow(r Row) ([]byte, error) {
	b := make([]byte, 0, 1024) // a start's row is some 600 bytes
	b = append(b, `{"pid":`...)
	b = strconv.AppendInt(b, int64(r.PID), 10)
	var ok bool
	if b, ok = appendFloatPtr(b, `,"create_time":`, r.CreateTime); !ok {
		return json.Marshal(r)
	}
	fields := []struct {
		key string
		val string
	}{{`,"purpose":`, r.Purpose}, {`,"install":`, r.Install}}
	for _, f := range fields {
		if b, ok = appendString(b, f.key, f.val); !ok {
			return json.Marshal(r)
		}
	}
	b = appendIntPtr(b, `,"spawner_pid":`, r.SpawnerPID)
	if b, ok = appendFloatPtr(b, `,"spawner_create":`, r.SpawnerCreate); !ok {
		return json.Marshal(r)
	}
	if b, ok = appendFloat(append(b, `,"registered_at":`...), r.RegisteredAt); !ok {
		return json.Marshal(r)
	}
	if b, ok = appendString(b, `,"argv":`, r.Argv); !ok {
		return json.Marshal(r)
	}
	if b, ok = appendString(b, `,"host":`, r.Host); !ok {
		return json.Marshal(r)
	}
	b = appendIntPtr(b, `,"port":`, r.Port)
	if b, ok = appendString(b, `,"profile":`, r.Profile); !ok {
		return json.Marshal(r)
	}
	if b, ok = appendString(b, `,"hermes_home":`, r.HermesHome); !ok {
		return json.Marshal(r)
	}
	b = strconv.AppendBool(append(b, `,"isolated":`...), r.Isolated)
	if b, ok = appendFloatPtr(b, `,"boot_start":`, r.BootStart); !ok {
		return json.Marshal(r)
	}
	if b, ok = appendFloatPtr(b, `,"spawner_boot":`, r.SpawnerBoot); !ok {
		return json.Marshal(r)
	}
	if r.BootID == nil {
		b = append(b, `,"boot_id":null`...)
	} else if b, ok = appendString(b, `,"boot_id":`, *r.BootID); !ok {
		return json.Marshal(r)
	}
	b = appendUintOmit(b, `,"start_ticks":`, r.StartTicks)
	b = appendUintOmit(b, `,"spawner_start_ticks":`, r.SpawnerStartTicks)
	b = appendUintOmit(b, `,"pidfd_id":`, r.PidfdID)
	b = appendUintOmit(b, `,"spawner_pidfd_id":`, r.SpawnerPidfdID)
	if r.PGID != nil {
		b = appendIntPtr(b, `,"pgid":`, r.PGID)
	}
	if b, ok = appendStringOmit(b, `,"scope":`, r.Scope); !ok {
		return json.Marshal(r)
	}
	if r.Reapable != nil {
		b = strconv.AppendBool(append(b, `,"reapable":`...), *r.Reapable)
	}
	if r.Generation != nil {
		b = appendIntPtr(b, `,"generation":`, r.Generation)
	}
	if r.Owner != nil {
		b = appendIntPtr(b, `,"owner":`, r.Owner)
	}
	if b, ok = appendStringOmit(b, `,"containment":`, r.Containment); !ok {
		return json.Marshal(r)
	}
	if b, ok = appendStringOmit(b, `,"cgroup":`, r.Cgroup); !ok {
		return json.Marshal(r)
	}
	b = appendUintOmit(b, `,"cgroup_id":`, r.CgroupID)
	if b, ok = appendStringOmit(b, `,"scope_id":`, r.ScopeID); !ok {
		return json.Marshal(r)
	}
	if b, ok = appendStringOmit(b, `,"cgroup_via":`, r.CgroupVia); !ok {
		return json.Marshal(r)
	}
	if r.CallerPID != nil {
		b = appendIntPtr(b, `,"caller_pid":`, r.CallerPID)
	}
	b = appendUintOmit(b, `,"caller_start_ticks":`, r.CallerStartTicks)
	return append(b, '}'), nil
}

func appendIntPtr(b []byte, key string, v *int) []byte {
	b = append(b, key...)
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*v), 10)
}

func appendUintOmit(b []byte, key string, v *uint64) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendUint(append(b, key...), *v, 10)
}

func appendFloatPtr(b []byte, key string, v *float64) ([]byte, bool) {
	b = append(b, key...)
	if v == nil {
		return append(b, "null"...), true
	}
	return appendFloat(b, *v)
}

// appendFloat is encoding/json's float64 encoding; false for what it refuses.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 to e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

func appendStringOmit(b []byte, key, s string) ([]byte, bool) {
	if s == "" {
		return b, true
	}
	return appendString(b, key, s)
}

// appendString appends key and s quoted, when no byte of s needs escaping; false otherwise.
func appendString(b []byte, key, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return b, false
		}
	}
	b = append(append(b, key...), '"')
	return append(append(b, s...), '"'), true
}
