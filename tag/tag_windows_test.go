package tag

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// On Windows the install id hashes the absolute path as Windows spells it: drive letter,
// backslashes, lower-cased. Spellings of one directory that differ only in case or in the
// separator name one install.
func TestInstallWindowsPath(t *testing.T) {
	sum := sha256.Sum256([]byte(`c:\opt\myapp`))
	want := hex.EncodeToString(sum[:])[:12]
	for _, root := range []string{`C:\OPT\MyApp`, `c:/opt/myapp`, `C:\Opt\MyApp\`, `C:\Opt\bin\..\MyApp`} {
		if got := Install(root); got != want {
			t.Errorf("Install(%s) = %q, want %q", root, got, want)
		}
	}
}
