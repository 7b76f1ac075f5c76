package ledger

import (
	"strings"
	"testing"
)

func rowOf(t *testing.T, raw string) Row {
	t.Helper()
	r, err := Reparse([]byte(raw))
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return r
}

// TestReplaceRowMerge: a row for a PID already recorded replaces it; when both name one
// incarnation exactly, what the new row lacks (absent or null) is kept from the old one byte for
// byte (the members are written again without white space), and what it has wins.
func TestReplaceRowMerge(t *testing.T) {
	custody := `{"pid": 42, "create_time": 100.5, "boot_id": "b", "boot_start": 7.5, "start_ticks": 750, "pgid": 42, "scope": "pgrp", "owner": 9, "reapable": true, "containment": "process-group", "purpose": "worker", "x": NaN}`
	tests := []struct {
		desc, old, new string
		want           []string // substrings of the result
		not            []string
	}{
		{"Hermes re-registers the same incarnation",
			custody,
			`{"pid": 42, "create_time": 100.51, "purpose": "mcp-helper", "boot_start": 7.5, "boot_id": "b", "port": null, "pgid": null}`,
			[]string{`"purpose":"mcp-helper"`, `"pgid":42`, `"scope":"pgrp"`, `"owner":9`, `"reapable":true`, `"containment":"process-group"`, `"start_ticks":750`, `"x":NaN`, `"port":null`},
			[]string{`"pgid":null`, `"purpose":"worker"`}},
		{"another incarnation of the PID",
			custody,
			`{"pid": 42, "create_time": 100.51, "boot_start": 7.51, "boot_id": "b"}`,
			[]string{`"boot_start": 7.51`}, // unchanged, as written
			[]string{`"scope"`, `"pgid"`}},
		{"another boot",
			custody,
			`{"pid": 42, "boot_start": 7.5, "boot_id": "c"}`,
			nil,
			[]string{`"scope"`}},
		{"epoch match only is not the same incarnation",
			`{"pid": 42, "create_time": 100.5, "pgid": 42}`,
			`{"pid": 42, "create_time": 100.5}`,
			nil,
			[]string{`"pgid"`}},
		{"the new row has the field",
			custody,
			`{"pid": 42, "start_ticks": 750, "boot_id": "b", "scope": "cgroup"}`,
			[]string{`"scope":"cgroup"`, `"owner":9`},
			[]string{`"pgrp"`}},
	}
	for _, tt := range tests {
		var rep Report
		rows, err := replaceRow([]Row{rowOf(t, `{"pid": 7}`), rowOf(t, tt.old)}, rowOf(t, tt.new), &rep)
		if err != nil || len(rows) != 2 || rows[0].PID != 7 || rows[1].PID != 42 {
			t.Fatalf("%s: %v, %v", tt.desc, rows, err)
		}
		raw, _ := rows[1].Raw()
		if _, err := Reparse(raw); err != nil {
			t.Errorf("%s: merged row %s is not a row: %v", tt.desc, raw, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(raw), w) {
				t.Errorf("%s: %s lacks %s", tt.desc, raw, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(string(raw), n) {
				t.Errorf("%s: %s has %s", tt.desc, raw, n)
			}
		}
	}
}
