//go:build !windows

package tag

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestPythonLower: lower-casing follows Python's str.lower, whose full mapping differs from
// strings.ToLower; the wants were printed by Python 3.11.
func TestPythonLower(t *testing.T) {
	tests := []struct{ in, want string }{
		{"İ", "i̇"},
		{"ΣΑΣ", "σας"},
		{"ΑΣ.", "ας."},
		{"Σ", "σ"},
		{"aΣ", "aς"},
		{"aΣ́b", "aσ́b"},
		{"aΣ́", "aς́"},
		{"ẞ", "ß"},
		{"K", "k"}, // Kelvin sign
		{"Ⅷ", "ⅷ"},
		{"ᾼ", "ᾳ"},
		{"/a/b\xff/c", "/a/b?/c"}, // Python decodes the byte to a surrogate, which "replace" encodes as '?'
	}
	for _, tt := range tests {
		if got := pythonLower(tt.in); got != tt.want {
			t.Errorf("pythonLower(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestInstallGolden: ids Python's install_id gives for roots that do not exist (resolved as they
// are), printed by Python 3.11.
func TestInstallGolden(t *testing.T) {
	for root, want := range map[string]string{
		"/opt/İstanbul/hermes": "50051951e166",
		"/srv/ΟΔΟΣ/x":          "cc36a4ff4b48",
		"/a/b\xff/c":           "f84de709fd00",
	} {
		if got := Install(root); got != want {
			t.Errorf("Install(%q) = %s, want %s", root, got, want)
		}
	}
}

// TestInstallResolvesLinks: every spelling of one directory, through symbolic links (relative
// and absolute, chained), "..", and a missing tail, hashes the resolved path, as Path.resolve
// gives it.
func TestInstallResolvesLinks(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "Real", "App")
	if err := os.MkdirAll(real, 0o700); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(real, filepath.Join(dir, "abs")))
	must(t, os.Symlink("Real/App", filepath.Join(dir, "rel")))
	must(t, os.Symlink("abs", filepath.Join(dir, "chain")))
	must(t, os.Symlink("loop", filepath.Join(dir, "loop")))
	id := func(p string) string {
		sum := sha256.Sum256([]byte(pythonLower(p)))
		return hex.EncodeToString(sum[:6])
	}
	for root, want := range map[string]string{
		real:                                      id(real),
		filepath.Join(dir, "abs"):                 id(real),
		filepath.Join(dir, "rel"):                 id(real),
		filepath.Join(dir, "chain"):               id(real),
		filepath.Join(dir, "chain") + "/":         id(real),
		dir + "/rel/../App":                       id(real), // ".." of the link's target, not of the link
		filepath.Join(dir, "abs", "missing", "x"): id(real + "/missing/x"),
		filepath.Join(dir, "loop", "x"):           id(dir + "/loop/x"),
	} {
		if got := Install(root); got != want {
			t.Errorf("Install(%s) = %s, want %s", root, got, want)
		}
	}
	// Python raises on a link loop; custody must only not hang or fail.
	if got := Install(filepath.Join(dir, "loop", "x")); len(got) != 12 {
		t.Errorf("Install through a link loop = %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
