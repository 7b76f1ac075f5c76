package custody

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A grant string is what a giver hands a receiver, through an environment variable, a file or an
// argument:
//
//	custody-grant-v1:<base64url, no padding, of one JSON object>
//
// The object's fields:
//
//	sock     the giver's socket: a Unix socket in a directory of its own, mode 0700; on Windows
//	         a named pipe \\.\pipe\custody-grant-<random> open to the giver's user alone
//	giver    the giver's PID; the receiver checks that the socket's peer is that process
//	ledger   the ledger the receipt goes into; the receiver must use the same one
//	secret   32 random bytes, base64url: what the giver compares, in constant time
//	expires  when the giver stops serving it, in Unix milliseconds
//
// The child itself is not named in the string: a grant handed to a command through its
// environment is minted before that command exists. The giver serves one child only and names it
// (its incarnation and scope) to a receiver that has presented the secret over the socket, whose
// peer credentials both sides check. The secret is a bearer token only for the giver's own user:
// another user cannot open the socket's directory (the pipe, on Windows), and the giver refuses a
// peer of another uid (another user SID).
const grantPrefix = "custody-grant-v1:"

// maxGrantLen bounds a grant string before it is decoded: a grant is a few hundred bytes.
const maxGrantLen = 4096

// The sentinels carry no "custody:" of their own: every error that wraps one is already
// custody's ("custody: adopt: grant refused: …"), and a prefix here would print twice.
var (
	// ErrGrantMalformed reports a string that is not a custody grant of a version this build reads.
	ErrGrantMalformed = errors.New("malformed grant")
	// ErrGrantExpired reports a grant past its expiry: its giver no longer serves it.
	ErrGrantExpired = errors.New("grant expired")
	// ErrGrantRefused reports a grant its giver refused, or could no longer serve: already used,
	// forged, presented by another user, its child gone, or its giver gone (which took the child
	// with it).
	ErrGrantRefused = errors.New("grant refused")
)

// grantToken is the decoded grant string.
type grantToken struct {
	Sock    string `json:"sock"`
	Giver   int    `json:"giver"`
	Ledger  string `json:"ledger"`
	Secret  string `json:"secret"`
	Expires int64  `json:"expires"`
}

func (t grantToken) String() string {
	b, _ := json.Marshal(t) // strings and integers: cannot fail
	return grantPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func (t grantToken) expiry() time.Time { return time.UnixMilli(t.Expires) }

// newSecret returns 32 random bytes, base64url.
func newSecret() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// parseGrant decodes a grant string. It refuses, wrapping [ErrGrantMalformed], anything but the
// exact form: unknown fields, a missing field, trailing bytes, a secret of another length.
func parseGrant(s string) (grantToken, error) {
	var t grantToken
	s = strings.TrimSpace(s)
	body, ok := strings.CutPrefix(s, grantPrefix)
	if !ok || len(s) > maxGrantLen {
		return t, fmt.Errorf("%w: it does not start with %q", ErrGrantMalformed, grantPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return t, fmt.Errorf("%w: %v", ErrGrantMalformed, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil || dec.More() {
		return t, fmt.Errorf("%w: its body is not a grant object", ErrGrantMalformed)
	}
	secret, err := base64.RawURLEncoding.DecodeString(t.Secret)
	switch {
	case err != nil || len(secret) != 32:
		return t, fmt.Errorf("%w: its secret is not 32 bytes", ErrGrantMalformed)
	case t.Sock == "" || t.Ledger == "":
		return t, fmt.Errorf("%w: it names no socket or no ledger", ErrGrantMalformed)
	case t.Giver <= 1 || t.Expires <= 0:
		return t, fmt.Errorf("%w: it names no giver or no expiry", ErrGrantMalformed)
	}
	return t, nil
}
