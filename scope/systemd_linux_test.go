package scope

import "testing"

// unitOf finds the innermost scope or service on a cgroup path: the unit whose delegation
// decides whether custody may write below it. Slices never hold processes.
func TestUnitOf(t *testing.T) {
	for _, tc := range []struct{ rel, unit string }{
		{"/user.slice/user-1000.slice/session-3.scope", "/user.slice/user-1000.slice/session-3.scope"},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-term-1.scope", "/user.slice/user-1000.slice/user@1000.service/app.slice/app-term-1.scope"},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/custody-41-96.scope/custody-4026531836-41-96/s1", "/user.slice/user-1000.slice/user@1000.service/app.slice/custody-41-96.scope"},
		{"/user.slice/user-1000.slice/user@1000.service/init.scope", "/user.slice/user-1000.slice/user@1000.service/init.scope"},
		{"/user.slice/user-1000.slice", ""},
		{"/custody/custody-4026531836-41-96/s1", ""},
		{"/docker/0123abcd", ""},
		{"/", ""},
		{"/.scope", "/.scope"}, // a name that is only the suffix is still systemd's to claim
	} {
		unit, ok := unitOf(tc.rel)
		if unit != tc.unit || ok != (tc.unit != "") {
			t.Errorf("unitOf(%q) = %q, %v; want %q", tc.rel, unit, ok, tc.unit)
		}
	}
}

// A nested owner's cgroup, in a scope of an outer owner inside a unit, is below an owner
// directory: custody's to write, without asking the manager again.
func TestInOwnerDir(t *testing.T) {
	const unit = "/u.slice/user@1000.service/app.slice/custody-41-96.scope"
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{unit + "/custody-4026531836-41-96/s1", true},
		{unit + "/custody-4026531836-41-96/s1/custody-4026531836-77-120/s2", true},
		{unit, false},
		{unit + "/sub", false},
		{unit + "x/custody-4026531836-41-96/s1", false},
		{"/other.scope/custody-4026531836-41-96/s1", false},
	} {
		if got := inOwnerDir(unit, tc.rel); got != tc.want {
			t.Errorf("inOwnerDir(%q) = %v; want %v", tc.rel, got, tc.want)
		}
	}
}
