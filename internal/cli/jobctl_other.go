//go:build unix && !linux

package cli

import "github.com/custody-dev/custody"

// followStops is Linux-only: it needs waitid(WSTOPPED) alongside the child's reaper. Elsewhere a
// child stopped by ^Z stays stopped until its group is sent SIGCONT.
func (t *terminal) followStops(*custody.Child) {}
