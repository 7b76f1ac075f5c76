package cli

import (
	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
)

// features probes each kernel facility custody uses, for real: only those, so that every line
// says something about what custody will do here.
func features() []check {
	return []check{pidfdCheck(), pidfsCheck(), containmentCheck(), bootCheck()}
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
