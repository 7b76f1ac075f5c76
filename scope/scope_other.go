//go:build !unix && !windows

package scope

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/custody-dev/custody/procid"
)

// Neither process groups nor job objects exist here (plan9, js, wasip1): every operation returns
// an error wrapping [errors.ErrUnsupported].

type sysScope struct{}

func unsupported(op string) error {
	return fmt.Errorf("scope: %s on %s: %w", op, runtime.GOOS, errors.ErrUnsupported)
}

func prepare(*exec.Cmd, bool) error { return unsupported("prepare") }

func attach(*exec.Cmd) (*Scope, error) { return nil, unsupported("attach") }

func abort(cmd *exec.Cmd) { cmd.Process.Kill() }

func fromGroup(int, procid.ID) (*Scope, error) { return nil, unsupported("process group") }

func (s *Scope) pgid() int { return 0 }

func (s *Scope) signal(os.Signal) error { return unsupported("signal") }

func (s *Scope) empty() (bool, error) { return false, unsupported("empty") }

func (s *Scope) close() error { return nil }

func (s *Scope) describe() string { return "no scope" }

func (s *Scope) kind() Kind { return "none" }

func (s *Scope) wait(context.Context) error { return unsupported("wait") }

func (s *Scope) desc() Desc { return Desc{} }

func open(Desc) (*Scope, error) { return nil, unsupported("open") }

func openCgroupPath(string) (*Scope, error) { return nil, unsupported("cgroup") }

func preparedCgroup(*exec.Cmd) string { return "" }

func abandon(*exec.Cmd) {}

func containment() (Kind, string, error) { return "none", "", unsupported("containment") }

func (s *Scope) release() error { return nil }

func leftovers() ([]Leftover, error) { return nil, nil }

func removeLeftover(Leftover) error { return unsupported("cgroups") }

func (s *Scope) ask() (string, error) { return "", unsupported("ask") }
