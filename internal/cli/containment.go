package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/custody-dev/custody/scope"
)

// The containment custody run asks for: --containment, else $CUSTODY_CONTAINMENT.
//
//	(empty)         the best there is: a cgroup where one can be made, else a process group,
//	                which custody run says on stderr (--quiet silences it)
//	cgroup          a cgroup (a job on Windows) or nothing: custody run refuses to start
//	process-group   a process group, even where a cgroup could be made; nothing is said
//
// $CUSTODY_CONTAINMENT's other values are ignored, as they always were; --containment's are bad
// input.
const (
	containAny   = ""
	containCg    = "cgroup"
	containGroup = "process-group"
)

// errNoContainer is custody run's refusal to start under --containment cgroup where no cgroup
// can be made; report adds the recipe for one.
var errNoContainer = errors.New("no cgroup can be made for the child")

// askedContainment returns what the flag, else the environment, asks for.
func askedContainment(flag string) (string, error) {
	switch flag {
	case containCg, containGroup:
		return flag, nil
	case containAny:
	default:
		return "", usagef("--containment %q: want cgroup or process-group", flag)
	}
	switch v := os.Getenv(scope.EnvContainment); v {
	case containCg, containGroup:
		return v, nil
	}
	return containAny, nil
}

// applyContainment makes this process's children get what was asked for, or refuses: for
// process-group it sets $CUSTODY_CONTAINMENT (which nested owners inherit); for cgroup it proves
// that one can be made.
func applyContainment(asked string) error {
	switch asked {
	case containGroup:
		return os.Setenv(scope.EnvContainment, containGroup)
	case containCg:
		if kind, _, why := scope.Containment(); kind == scope.KindGroup {
			return fmt.Errorf("run: containment cgroup asked for: %w: %v; the child was not started", errNoContainer, why)
		}
	}
	return nil
}

// warnFallback says once, unless quiet, that the child got a process group where none was asked
// for, why, and what that leaves out.
func warnFallback(stderr io.Writer, asked, got string, quiet bool) {
	if quiet || asked != containAny || got != scope.KindGroup.Containment() {
		return
	}
	_, _, why := scope.Containment()
	if why == nil {
		why = errors.New("the cgroup could not be made at the start")
	}
	fmt.Fprintf(stderr, "custody: warning: run: fell back to a process group: %v; a descendant that leaves "+
		"the group is still found by the scope id in its environment ($%s), but one that also execs with "+
		"a cleared environment escapes (--containment cgroup refuses instead; --quiet silences this)\n",
		why, scope.EnvScopeID)
}
