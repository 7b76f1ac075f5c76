package scope

import (
	"fmt"

	"github.com/custody-dev/custody/internal/winproc"
	"golang.org/x/sys/windows"
)

func (s *Scope) holds(pid int) (bool, error) {
	s.sys.mu.RLock()
	defer s.sys.mu.RUnlock()
	if s.sys.job == 0 {
		return false, fmt.Errorf("scope: %v: closed", s)
	}
	p, _, err := winproc.Open(pid, memberAccess, 0)
	if err != nil {
		return false, err
	}
	defer windows.CloseHandle(p)
	return winproc.InJob(p, s.sys.job)
}
