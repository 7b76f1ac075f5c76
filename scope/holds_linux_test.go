package scope_test

import (
	"os"
	"testing"
)

// Holds finds a member that left the child's process group and ancestry (setsid in a
// grandchild), for the cgroup and for the group, and not the test itself.
func TestHolds(t *testing.T) {
	for _, kind := range []string{"cgroup", "pgrp"} {
		t.Run(kind, func(t *testing.T) {
			if kind == "cgroup" {
				requireCgroups(t)
			} else {
				groupsOnly(t)
			}
			p, s := startScoped(t, "-depth", "1", "-setsid")
			ids := ready(t, p)
			want := map[int]bool{ids[0].PID: true, ids[1].PID: kind == "cgroup", os.Getpid(): false}
			for pid, in := range want {
				if got, err := s.Holds(pid); err != nil || got != in {
					t.Errorf("%v.Holds(%d) = %v, %v; want %v", s, pid, got, err, in)
				}
			}
		})
	}
}
