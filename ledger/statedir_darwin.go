package ledger

import "os"

// stateDir is ~/Library/Application Support, macOS's per-user, non-synced app data folder.
func stateDir() (string, error) { return os.UserConfigDir() }
