package tag

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func TestParse(t *testing.T) {
	good := []struct {
		in   string
		want Tag
	}{
		{"v1:0123456789ab:serve:4242:1764428400.125", Tag{"0123456789ab", "serve", 4242, ptr(1764428400.125)}},
		{"v1:-:mcp-helper:1:-", Tag{"-", "mcp-helper", 1, nil}},
		{"v1:x:gateway:99:0.000", Tag{"x", "gateway", 99, ptr(0.0)}},
	}
	for _, tc := range good {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
		}
		if got.String() != tc.in {
			t.Errorf("Parse(%q).String() = %q", tc.in, got.String())
		}
	}
	bad := []struct{ desc, in string }{
		{"empty", ""},
		{"wrong version", "v2:abc:serve:1:-"},
		{"four fields", "v1:abc:serve:1"},
		{"six fields", "v1:abc:serve:1:-:x"},
		{"empty install", "v1::serve:1:-"},
		{"empty purpose", "v1:abc::1:-"},
		{"pid zero", "v1:abc:serve:0:-"},
		{"pid negative", "v1:abc:serve:-3:-"},
		{"pid plus sign", "v1:abc:serve:+3:-"},
		{"pid not integer", "v1:abc:serve:abc:-"},
		{"pid float", "v1:abc:serve:1.5:-"},
		{"pid overflow", "v1:abc:serve:99999999999999999999:-"},
		{"create word", "v1:abc:serve:1:now"},
		{"create empty", "v1:abc:serve:1:"},
		{"create nan", "v1:abc:serve:1:NaN"},
		{"create inf", "v1:abc:serve:1:Inf"},
		{"create negative", "v1:abc:serve:1:-1.000"},
	}
	for _, tc := range bad {
		if got, err := Parse(tc.in); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Parse(%q) = %+v, %v; want ErrMalformed", tc.desc, tc.in, got, err)
		}
	}
}

func TestStringThreeDecimals(t *testing.T) {
	got := Tag{"abc", "serve", 7, ptr(12.5)}.String()
	if got != "v1:abc:serve:7:12.500" {
		t.Fatalf("String() = %q", got)
	}
}

func TestInstall(t *testing.T) {
	root, lower := "/OPT/MyApp", "/opt/myapp"
	if runtime.GOOS == "windows" { // an absolute path there has a drive
		root, lower = `C:\OPT\MyApp`, `c:\opt\myapp`
	}
	sum := sha256.Sum256([]byte(lower))
	want := hex.EncodeToString(sum[:])[:12]
	if got := Install(root); got != want {
		t.Errorf("Install(%s) = %q, want %q", root, got, want)
	}
	if got := Install(""); len(got) != 12 || strings.Trim(got, "0123456789abcdef") != "" {
		t.Errorf("Install(\"\") = %q, want 12 hex digits", got)
	}
}

func TestEnvName(t *testing.T) {
	t.Setenv("CUSTODY_TAG_ENV", "")
	if got := EnvName(""); got != DefaultEnv {
		t.Errorf("EnvName() = %q", got)
	}
	t.Setenv("CUSTODY_TAG_ENV", "HERMES_SPAWN")
	if got := EnvName(""); got != "HERMES_SPAWN" {
		t.Errorf("EnvName() with CUSTODY_TAG_ENV = %q", got)
	}
	if got := EnvName("X_TAG"); got != "X_TAG" {
		t.Errorf("EnvName(X_TAG) = %q", got)
	}
}

func TestValidEnvName(t *testing.T) {
	for name, want := range map[string]bool{"CUSTODY_SPAWN": true, "HERMES_SPAWN": true, "_x9": true,
		"": false, "9X": false, "A=B": false, "A B": false, "A\x00B": false, "Ä": false, "A-B": false} {
		if got := ValidEnvName(name); got != want {
			t.Errorf("ValidEnvName(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzParse: parsing never panics, whatever parses re-encodes to a tag that parses to the same
// value, and every valid tag built from parts round-trips through String and Parse.
func FuzzParse(f *testing.F) {
	f.Add("v1:0123456789ab:serve:4242:1764428400.125", "abc", "serve", 12, 1.0, true)
	f.Add("v1:-:x:1:-", "-", "gw", 1, 0.0, false)
	f.Add("v1:a:b:c:d:e", "a:b", "", -1, -1.0, true)
	f.Fuzz(func(t *testing.T, s, install, purpose string, pid int, create float64, hasCreate bool) {
		if got, err := Parse(s); err == nil {
			again, err := Parse(got.String())
			if err != nil {
				t.Fatalf("Parse(%q) = %+v, whose String %q does not parse: %v", s, got, got.String(), err)
			}
			if !sameTag(got, again) {
				t.Fatalf("Parse(%q) = %+v, reparsed %+v", s, got, again)
			}
		}
		in := Tag{Install: install, Purpose: purpose, SpawnerPID: pid}
		if hasCreate {
			in.SpawnerCreate = &create
		}
		if in.Validate() != nil || (hasCreate && create > 1e15) {
			return // beyond 1e15 s, three decimals exceed a float64's precision
		}
		out, err := Parse(in.String())
		if err != nil {
			t.Fatalf("valid %+v encodes to %q, which does not parse: %v", in, in.String(), err)
		}
		if hasCreate {
			rounded := roundTo3(create)
			in.SpawnerCreate = &rounded
		}
		if !sameTag(in, out) {
			t.Fatalf("round trip %+v -> %q -> %+v", in, in.String(), out)
		}
	})
}

func roundTo3(c float64) float64 {
	t, _ := Parse(Tag{"a", "b", 1, &c}.String())
	return *t.SpawnerCreate
}

func sameTag(a, b Tag) bool {
	if a.Install != b.Install || a.Purpose != b.Purpose || a.SpawnerPID != b.SpawnerPID {
		return false
	}
	if (a.SpawnerCreate == nil) != (b.SpawnerCreate == nil) {
		return false
	}
	return a.SpawnerCreate == nil || *a.SpawnerCreate == *b.SpawnerCreate
}
