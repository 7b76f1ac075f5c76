//go:build !linux

package agent

// subreaper does nothing: macOS has no child subreaper, and orphans go to launchd; on Windows a
// job holds every descendant whatever its parent.
func (s *server) subreaper(done <-chan struct{}) {}
