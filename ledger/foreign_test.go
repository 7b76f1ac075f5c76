package ledger_test

import (
	"testing"

	"github.com/custody-dev/custody/ledger"
)

// TestForeign: a row is foreign when it has a field custody does not know, however its name is
// spelled, and only then.
func TestForeign(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		foreign bool
	}{
		{`{"pid": 12, "create_time": 1.5, "purpose": "serve", "pidfd_id": 7, "cgroup_id": 3}`, false},
		{`{"pid": 12, "p\u0075rpose": "serve"}`, false},
		{`{"pid": 12, "load": 0.5}`, true},
		{`{"pid": 12, "st\u0061te": "alive"}`, true},
		{`{"pid": 12, "PID": 13}`, true},
	} {
		r, err := ledger.Reparse([]byte(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if r.Foreign() != tc.foreign {
			t.Errorf("%s: Foreign() = %v, want %v", tc.raw, r.Foreign(), tc.foreign)
		}
	}
	r, err := ledger.Reparse([]byte(`{"pid": 12}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set("load", 0.5); err != nil || !r.Foreign() {
		t.Errorf("after Set of an unknown field: Foreign() = %v, %v; want true", r.Foreign(), err)
	}
}

// TestRowDelete: Delete removes one field, bytes and typed view, and leaves every other field's
// bytes as they were, foreign ones included; deleting a field the row lacks changes nothing.
func TestRowDelete(t *testing.T) {
	r, err := ledger.Reparse([]byte(`{"pid":12,"spawner_pidfd_id":7,"load":0.5,"purpose":"serve"}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.Delete("spawner_pidfd_id"); err != nil {
			t.Fatal(err)
		}
		raw, err := r.Raw()
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"load":0.5,"pid":12,"purpose":"serve"}`; string(raw) != want {
			t.Errorf("after Delete: %s, want %s", raw, want)
		}
		if r.SpawnerPidfdID != nil || r.Purpose != "serve" || !r.Foreign() {
			t.Errorf("after Delete: spawner pidfs id %v, purpose %q, foreign %v", r.SpawnerPidfdID, r.Purpose, r.Foreign())
		}
	}
}
