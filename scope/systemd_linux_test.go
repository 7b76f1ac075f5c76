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
