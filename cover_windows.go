package custody

import (
	"os/exec"

	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

// On Windows the job object is the cover: the owner holds its only handle, and the kernel closes
// it when the owner dies, killing every process in the job (KILL_ON_JOB_CLOSE). No supervisor.

func (o *Owner) warm() error { return nil }

func (o *Owner) coverEarly(scope.Desc) (bool, error) { return false, nil }

func (o *Owner) cover(*scope.Scope, string) error { return nil }

func (o *Owner) uncover(*scope.Scope) error { return nil }

func outersFromEnv() []*supervise.Outer { return nil }

// stampOuter does nothing: nested jobs nest by themselves.
func (o *Owner) stampOuter(*exec.Cmd, bool) {}

func (o *Owner) coverOuter(*scope.Scope) error { return nil }
