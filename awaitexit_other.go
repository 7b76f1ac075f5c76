//go:build !linux

package custody

// awaitExit does nothing: cmd.Wait waits for the leader (on Windows a wait on its process handle;
// on macOS waitid).
func (c *Child) awaitExit() {}
