//go:build linux || darwin

package custody

// SweepGrantDirs removes the grant directories of tmp, but own, that no giver holds, as each new
// grant does in the background.
func SweepGrantDirs(tmp, own string) []string { return sweepGrantDirs(tmp, own) }
