package tag

import "path/filepath"

// resolve returns abs with its symbolic links resolved, as Python's Path.resolve does, or abs
// cleaned when that fails (a path that does not exist yet): Windows' realpath resolves what it
// can open through GetFinalPathNameByHandle, and filepath.EvalSymlinks does the same.
func resolve(abs string) string {
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return filepath.Clean(abs)
}
