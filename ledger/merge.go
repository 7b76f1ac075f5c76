package ledger

import (
	"encoding/json"

	"github.com/custody-dev/custody/internal/jsonscan"
)

// replaceRow returns rows with row in place of every row with its PID. When a replaced row names
// the same incarnation as row, the fields row lacks (absent, or null) are kept from it: a program
// that re-registers a child custody started, knowing nothing of its scope, keeps custody's pgid,
// scope, owner, reapable and containment, so a later stop still stops the whole scope. Which rows
// name one incarnation is procid's rule ([procid.Record.Same]).
func replaceRow(rows []Row, row Row, rep *Report) ([]Row, error) {
	kept := rows[:0]
	for _, r := range rows {
		if r.PID != row.PID {
			kept = append(kept, r)
			continue
		}
		rep.Pruned++
		if row.Record().Same(r.Record()) {
			merged, err := mergeRow(row, r)
			if err != nil {
				return nil, err
			}
			row = merged
		}
	}
	return append(kept, row), nil
}

// mergeRow returns row with every field of old that row lacks (absent, null, or one of the
// descriptive fields at its empty default, see unknown) appended, each as old holds it, byte for
// byte.
func mergeRow(row, old Row) (Row, error) {
	raw, err := row.Raw()
	if err != nil {
		return Row{}, err
	}
	has := map[string]bool{}
	jsonscan.Members(raw, func(k, v []byte) bool {
		if !jsonscan.IsNull(v) && !unknown(k, v) {
			has[string(k)] = true
		}
		return true
	})
	oldRaw, err := old.Raw()
	if err != nil {
		return Row{}, err
	}
	var extra []byte
	jsonscan.Members(oldRaw, func(k, v []byte) bool {
		if has[string(k)] || jsonscan.IsNull(v) {
			return true
		}
		key, _ := json.Marshal(string(k))
		extra = append(append(append(append(extra, ','), key...), ':'), v...)
		return true
	})
	if extra == nil {
		return row, nil
	}
	merged := dropNulls(raw, old, has)
	if len(merged) == 2 { // {}: no member to follow
		extra = extra[1:]
	}
	merged = append(merged[:len(merged)-1], extra...) // before the closing brace
	merged = append(merged, '}')
	out, ok := decodeRow(merged, decodeFull, nil)
	if !ok {
		return row, nil // cannot happen: both halves were valid rows
	}
	return out, nil
}

// unknown reports whether v, the value of key k in a row custody made, is the empty default that
// its encoding writes for a Hermes field it knows nothing of: host, profile and hermes_home "",
// isolated false. Every row carries them (Hermes's reader expects them), but they say only that
// the writer had no value: over another program's values for the same process (custody register
// of a process Hermes registered with its details) they would replace what that program knew.
func unknown(k, v []byte) bool {
	switch string(k) {
	case "host", "profile", "hermes_home":
		return string(v) == `""`
	case "isolated":
		return string(v) == "false"
	}
	return false
}

// dropNulls returns raw, a JSON object, without the members that are null in it and set in old
// (they are about to be appended from old), and without white space before its closing brace.
func dropNulls(raw []byte, old Row, has map[string]bool) []byte {
	oldSet := map[string]bool{}
	oldRaw, _ := old.Raw()
	jsonscan.Members(oldRaw, func(k, v []byte) bool {
		if !jsonscan.IsNull(v) {
			oldSet[string(k)] = true
		}
		return true
	})
	out := []byte{'{'}
	jsonscan.Members(raw, func(k, v []byte) bool {
		if !has[string(k)] && oldSet[string(k)] {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		key, _ := json.Marshal(string(k))
		out = append(append(append(out, key...), ':'), v...)
		return true
	})
	return append(out, '}')
}
