//go:build unix && !linux

package scope

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// Only Linux has cgroups: every scope here is a process group, and no cgroup is ever made.

type cgroup struct {
	path, rel string
	id        uint64
}

func noCgroups() error {
	return fmt.Errorf("scope: cgroups on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

func (c *cgroup) signal(unix.Signal) error                   { return noCgroups() }
func (c *cgroup) populated() (bool, error)                   { return false, noCgroups() }
func (c *cgroup) wait(context.Context) error                 { return noCgroups() }
func (c *cgroup) kill() error                                { return noCgroups() }
func (c *cgroup) remove() error                              { return noCgroups() }
func (c *cgroup) disown()                                    {}
func (c *cgroup) teardown() error                            { return noCgroups() }
func (c *cgroup) close()                                     {}
func prepareCgroup(*exec.Cmd, *Reservation) (*cgroup, error) { return nil, nil }
func openRecorded(string, uint64) (*cgroup, error)           { return nil, noCgroups() }
func openCgroupPath(string) (*Scope, error)                  { return nil, noCgroups() }
func containment() (Kind, string, error)                     { return KindGroup, "", noCgroups() }

func leftovers() ([]Leftover, error) { return nil, nil }

func releaseOwnerDir() {}

func removeLeftover(Leftover) error { return noCgroups() }

func removeDeadOwner(context.Context, string) error { return noCgroups() }

func removeDeadOwnerDir(context.Context, string) error { return noCgroups() }

func ownerDir() string { return "" }
