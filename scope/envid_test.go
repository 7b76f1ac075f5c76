package scope_test

import (
	"slices"
	"testing"

	"github.com/custody-dev/custody/scope"
)

func TestStampEnvID(t *testing.T) {
	a, b := scope.NewEnvID(), scope.NewEnvID()
	if a == b || !scope.ValidEnvID(a) {
		t.Fatalf("NewEnvID: %q, %q", a, b)
	}
	env := scope.StampEnvID([]string{"PATH=/bin"}, a)
	if !slices.Equal(env, []string{"PATH=/bin", scope.EnvScopeID + "=" + a}) || scope.EnvIDOf(env) != a {
		t.Fatalf("stamped once: %q", env)
	}
	// A nested owner's child carries both ids, the outer first; os/exec keeps the last entry.
	env = scope.StampEnvID(env, b)
	if last := env[len(env)-1]; last != scope.EnvScopeID+"="+a+","+b || scope.EnvIDOf(env) != b {
		t.Fatalf("stamped twice: %q", env)
	}
}

func TestValidEnvID(t *testing.T) {
	for _, bad := range []string{"", "x", "0123456789abcdef0123456789abcdeF", "0123456789abcdef0123456789abcde",
		"0123456789abcdef0123456789abcdef0", "0123456789abcdef,123456789abcdef"} {
		if scope.ValidEnvID(bad) {
			t.Errorf("ValidEnvID(%q) = true", bad)
		}
		if _, err := scope.FindStrays([]string{bad}, 0); err == nil {
			t.Errorf("FindStrays(%q): no error", bad)
		}
	}
	if env := []string{scope.EnvScopeID + "=not-an-id"}; scope.EnvIDOf(env) != "" {
		t.Errorf("EnvIDOf(%q) = %q", env, scope.EnvIDOf(env))
	}
}

func TestCarries(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	other := "fedcba9876543210fedcba9876543210"
	for _, c := range []struct {
		block string
		want  bool
	}{
		{"A=1\x00CUSTODY_SCOPE=" + id + "\x00", true},
		{"CUSTODY_SCOPE=" + other + "," + id, true}, // a nested scope's descendant, no final NUL
		{"CUSTODY_SCOPE=" + other + "\x00CUSTODY_SCOPE=" + id + "\x00", true},
		{"CUSTODY_SCOPE=" + other + "\x00", false},
		{"XCUSTODY_SCOPE=" + id + "\x00", false},
		{"A=CUSTODY_SCOPE=" + id + "\x00", false},
		{"CUSTODY_SCOPE=" + id + "0\x00", false},
		{"CUSTODY_SCOPE=" + id[:31] + "\x00", false},
		{"", false},
	} {
		if got := scope.Carries([]byte(c.block), []string{id}); got != c.want {
			t.Errorf("carries(%q) = %v, want %v", c.block, got, c.want)
		}
	}
}
