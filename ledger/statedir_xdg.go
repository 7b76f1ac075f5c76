//go:build !darwin && !windows

package ledger

import (
	"os"
	"path/filepath"
)

// stateDir follows the XDG base directory spec: $XDG_STATE_HOME when absolute, else
// ~/.local/state.
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state"), nil
}
