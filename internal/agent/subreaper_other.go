//go:build unix && !linux

package agent

// subreaper does nothing: macOS has no child subreaper, and orphans go to launchd.
func (s *server) subreaper(done <-chan struct{}) {}
