//go:build unix

package scope

import "github.com/custody-dev/custody/procid"

func (s *Scope) holds(pid int) (bool, error) {
	if d := s.desc(); d.Kind == KindCgroup {
		return cgroupHolds(d.Cgroup, pid)
	}
	inc, err := procid.Read(pid)
	if err != nil {
		return false, err
	}
	return inc.PGID == s.pgid(), nil
}
