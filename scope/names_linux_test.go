package scope

import (
	"regexp"
	"slices"
	"testing"
)

// TestNames: matchOwnerDir and isScopeName accept exactly what the patterns of the names custody
// gives its cgroups accept, and matchOwnerDir returns the same fields, on the edges of each.
func TestNames(t *testing.T) {
	owner := regexp.MustCompile(`^custody-([0-9]+)-([0-9]+)-([0-9]+)$`)
	scope := regexp.MustCompile(`^s[0-9]+$`)
	names := []string{
		"custody-4026531836-1234-5678", "custody-1-2-3", "custody-0-0-0", "custody-1-2-3-4", "custody-1-2",
		"custody-1--3", "custody--2-3", "custody-1-2-", "custody-", "custody", "custody-a-2-3",
		"custody-1-2-3 ", " custody-1-2-3", "custody-1-2-3\n", "Custody-1-2-3", "custody-１-2-3",
		"custody-1-2-3x", "xcustody-1-2-3", "custody-1-2-+3", "custody-1-2--3", "",
		"s1", "s0", "s123456789", "s", "s-1", "s1x", "S1", "ss1", "s 1", "s1\n", "s١",
	}
	for _, n := range names {
		if got, want := matchOwnerDir(n), owner.FindStringSubmatch(n); !slices.Equal(got, want) {
			t.Errorf("matchOwnerDir(%q) = %q, want %q", n, got, want)
		}
		if got, want := isScopeName(n), scope.MatchString(n); got != want {
			t.Errorf("isScopeName(%q) = %v, want %v", n, got, want)
		}
	}
}
