package cli

import (
	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// features probes each kernel facility custody uses, for real: only those, so that every line
// says something about what custody will do here.
func features() []check {
	return []check{pidfdCheck(), pidfsCheck(), groupSignalCheck(), containmentCheck(), systemdCheck(), bootCheck()}
}

func groupSignalCheck() check {
	if err := scope.GroupSignalError(); err != nil {
		return check{Name: "group signal", Detail: err.Error() + "; a process group's identity is checked " +
			"again just before each kill(-pgid)"}
	}
	return check{Name: "group signal", OK: true, Detail: "process groups are signalled through a pidfd on their " +
		"leader (PIDFD_SIGNAL_PROCESS_GROUP): a recycled group id is never reached"}
}

func pidfsCheck() check {
	if err := procid.PidfsError(); err != nil {
		return check{Name: "pidfs ids", Detail: err.Error() + "; rows are matched by start ticks, " +
			"which cannot tell a PID recycled within one clock tick"}
	}
	return check{Name: "pidfs ids", OK: true, Detail: "fstat of a pidfd names one process per boot; rows record it"}
}

func pidfdCheck() check {
	if err := authority.PidfdError(); err != nil {
		return check{Name: "pidfd", Detail: err.Error() + "; falls back to start-time checks before each signal"}
	}
	return check{Name: "pidfd", OK: true, Detail: "pidfd_open, pidfd_send_signal and poll work"}
}
