package ledger

import (
	"errors"
	"os"
)

// stateDir is %LocalAppData%: per user and per machine (it does not roam, and the PIDs a ledger
// names mean nothing on another machine).
func stateDir() (string, error) {
	if d := os.Getenv("LocalAppData"); d != "" {
		return d, nil
	}
	return "", errors.New("%LocalAppData% is not set")
}
