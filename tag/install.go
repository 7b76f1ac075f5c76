package tag

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Install returns the install id of root: the first 12 hex digits of the SHA-256 of its
// symlink-resolved absolute path, lower-cased as Python's str.lower does. It is the id Hermes
// computes (str(Path(root).resolve()).lower(), encoded as UTF-8 with "replace"), so that the two
// programs' install-filtered reads see each other's rows: without the resolution a root reached
// through a symbolic link had two ids, and strings.ToLower differs from str.lower on 'İ' and on
// a final 'Σ'. An empty root means the directory holding the running executable. When neither
// can be found the id is "-".
func Install(root string) string {
	if root == "" {
		exe, err := os.Executable()
		if err != nil {
			return Unknown
		}
		root = filepath.Dir(exe)
	}
	abs, err := absolute(root)
	if err != nil {
		return Unknown
	}
	sum := sha256.Sum256([]byte(pythonLower(resolve(abs))))
	return hex.EncodeToString(sum[:6])
}

// absolute joins a relative root to the working directory without cleaning it: ".." must be
// taken after the links before it are resolved (see resolve), as Python takes it.
func absolute(root string) (string, error) {
	if filepath.IsAbs(root) {
		return root, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + string(filepath.Separator) + root, nil
}

// pythonLower lower-cases s as Python's str.lower does, then encodes it as Python's
// str.encode("utf-8", "replace") would: a byte that is not UTF-8 (Python decodes a path's such
// bytes to lone surrogates) becomes '?'. Python applies Unicode's full lowercase mapping: U+0130
// 'İ' becomes "i̇" (two code points, where Go's simple mapping gives "i"), and a capital sigma
// ending a word becomes 'ς' (Final_Sigma).
func pythonLower(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteByte('?')
		case r == 'İ':
			b.WriteString("i\u0307")
		case r == 'Σ':
			if finalSigma(s, i, i+n) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
		i += n
	}
	return b.String()
}

// finalSigma reports whether the sigma at s[at:end] ends a word in Unicode's Final_Sigma sense:
// a cased letter before it and none after it, case-ignorable characters skipped both ways.
func finalSigma(s string, at, end int) bool {
	before := false
	for j := at; j > 0; {
		r, n := utf8.DecodeLastRuneInString(s[:j])
		j -= n
		if !caseIgnorable(r) {
			before = cased(r)
			break
		}
	}
	if !before {
		return false
	}
	for j := end; j < len(s); {
		r, n := utf8.DecodeRuneInString(s[j:])
		j += n
		if !caseIgnorable(r) {
			return !cased(r)
		}
	}
	return true
}

func cased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

// caseIgnorable is Unicode's Case_Ignorable: marks, format characters, modifiers, and the
// apostrophes and dots that join letters within a word.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', '^', '`', '\u00b7', '\u2018', '\u2019', '\u2024', '\u2027', '\ufe13', '\ufe52', '\ufe55', '\uff07', '\uff0e', '\uff1a':
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
