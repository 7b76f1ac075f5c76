// Package tag encodes and parses the spawn tag: an environment variable a spawner stamps on each
// child, naming the install, the purpose and the spawner's incarnation. The format is the Hermes
// HERMES_SPAWN v1 format, so programs that speak either name can share it:
//
//	v1:<install>:<purpose>:<spawner_pid>:<spawner_create>
//
// install and purpose are non-empty and hold no ':'; spawner_pid is a decimal integer > 0;
// spawner_create is epoch seconds printed with exactly three decimals, or '-' when unknown.
// Anything else parses as no tag: a tag is a claim made by whoever set the environment, so a
// malformed one is ignored rather than guessed at.
package tag

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// DefaultEnv is the variable custody stamps when --tag-env / CUSTODY_TAG_ENV name no other.
const DefaultEnv = "CUSTODY_SPAWN"

// EnvName returns the tag variable's name: override if non-empty, else $CUSTODY_TAG_ENV, else
// [DefaultEnv].
func EnvName(override string) string {
	if override != "" {
		return override
	}
	if v := os.Getenv("CUSTODY_TAG_ENV"); v != "" {
		return v
	}
	return DefaultEnv
}

// ValidEnvName reports whether name can name the tag variable: a portable environment name,
// letters, digits and underscores, not starting with a digit. Anything else would not survive as
// one variable: "A=B" would stamp A with "B=v1:…", and an empty name or a NUL is no variable.
func ValidEnvName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// ErrMalformed is wrapped by every [Parse] error.
var ErrMalformed = errors.New("tag: malformed spawn tag")

// Unknown is the field value for an install or create time that is not known.
const Unknown = "-"

// Tag is one parsed spawn tag.
type Tag struct {
	Install       string   // 12 hex digits of the install root's hash, or "-"
	Purpose       string   // what the child is for: serve, gateway, mcp-helper, …
	SpawnerPID    int      // the spawner's PID
	SpawnerCreate *float64 // the spawner's epoch start, nil when unknown
}

// String encodes t. It does not validate; use [Tag.Validate] first for untrusted fields.
func (t Tag) String() string {
	create := Unknown
	if t.SpawnerCreate != nil {
		create = strconv.FormatFloat(*t.SpawnerCreate, 'f', 3, 64)
	}
	return "v1:" + t.Install + ":" + t.Purpose + ":" + strconv.Itoa(t.SpawnerPID) + ":" + create
}

// Validate reports why t cannot be encoded into a tag that parses back to t.
func (t Tag) Validate() error {
	switch {
	case !validField(t.Install):
		return fmt.Errorf("%w: install %q is empty or holds ':'", ErrMalformed, t.Install)
	case !validField(t.Purpose):
		return fmt.Errorf("%w: purpose %q is empty or holds ':'", ErrMalformed, t.Purpose)
	case t.SpawnerPID <= 0:
		return fmt.Errorf("%w: spawner pid %d is not positive", ErrMalformed, t.SpawnerPID)
	case t.SpawnerCreate != nil && !validCreate(*t.SpawnerCreate):
		return fmt.Errorf("%w: spawner create time %v is not a finite non-negative number", ErrMalformed, *t.SpawnerCreate)
	}
	return nil
}

// Parse parses a tag. Every failure wraps [ErrMalformed].
func Parse(s string) (Tag, error) {
	f := strings.Split(s, ":")
	if len(f) != 5 {
		return Tag{}, fmt.Errorf("%w: %d fields, want 5", ErrMalformed, len(f))
	}
	if f[0] != "v1" {
		return Tag{}, fmt.Errorf("%w: version %q, want v1", ErrMalformed, f[0])
	}
	t := Tag{Install: f[1], Purpose: f[2]}
	pid, ok := parsePID(f[3])
	if !ok {
		return Tag{}, fmt.Errorf("%w: spawner pid %q is not a positive integer", ErrMalformed, f[3])
	}
	t.SpawnerPID = pid
	if f[4] != Unknown {
		c, err := strconv.ParseFloat(f[4], 64)
		if err != nil || !validCreate(c) {
			return Tag{}, fmt.Errorf("%w: spawner create time %q is neither a float nor '-'", ErrMalformed, f[4])
		}
		t.SpawnerCreate = &c
	}
	if err := t.Validate(); err != nil {
		return Tag{}, err
	}
	return t, nil
}

// FromEnv returns the tag in the environment variable name, and whether one parsed.
func FromEnv(name string) (Tag, bool) {
	t, err := Parse(os.Getenv(name))
	return t, err == nil
}

func validField(s string) bool { return s != "" && !strings.Contains(s, ":") }

func validCreate(c float64) bool { return c >= 0 && !math.IsInf(c, 0) && !math.IsNaN(c) }

// parsePID accepts decimal digits only: strconv.Atoi would also take "+5", which no spawner
// writes and which would make two spellings of one tag.
func parsePID(s string) (int, bool) {
	if s == "" || len(s) > 10 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}
