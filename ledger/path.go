package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// FileName is the ledger's name inside the state directory: the name Hermes uses, so both
// programs find one file when they share a state directory.
const FileName = "spawn-ledger.json"

// Resolve returns the ledger path: flag when non-empty, else $CUSTODY_LEDGER, else
// FileName in the user's state directory (see [StateDir]).
func Resolve(flag string) (string, error) {
	p := flag
	if p == "" {
		p = os.Getenv("CUSTODY_LEDGER")
	}
	if p == "" {
		dir, err := StateDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(dir, FileName)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("ledger path: %w", err)
	}
	return abs, nil
}

// StateDir returns custody's per-user state directory:
//
//	Linux    $XDG_STATE_HOME/custody, else ~/.local/state/custody
//	macOS    ~/Library/Application Support/custody
//	Windows  %LocalAppData%\custody
func StateDir() (string, error) {
	dir, err := stateDir()
	if err != nil {
		return "", fmt.Errorf("ledger state directory: %w", err)
	}
	return filepath.Join(dir, "custody"), nil
}

// prepareDir makes the ledger's directory if needed and checks that it may be trusted (see
// [Ledger.Trust]). The directories above it are checked before anything is made in them. Only
// directories this call creates get mode 0700 set explicitly (a umask could leave them wider); an
// existing directory the user chose keeps its mode.
func prepareDir(path string) error {
	dir := filepath.Dir(path)
	if exists, err := checkDirExists(dir, true); err != nil || exists {
		return err
	}
	missing := []string{}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, os.ErrNotExist) || filepath.Dir(d) == d {
			break
		}
		missing = append(missing, d)
	}
	if len(missing) > 0 {
		if err := checkDir(filepath.Dir(missing[len(missing)-1]), false); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("ledger directory: %w", err)
		}
	}
	for _, d := range missing {
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("ledger directory: %w", err)
		}
	}
	return checkDir(dir, true)
}
