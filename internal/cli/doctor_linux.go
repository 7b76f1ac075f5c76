package cli

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
)

// features probes each kernel facility custody can use, for real.
func features() []check {
	return []check{pidfdCheck(), pidfsCheck(), containmentCheck(), subreaperCheck(), bootCheck()}
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

// subreaperCheck sets and clears PR_SET_CHILD_SUBREAPER on this short-lived process.
func subreaperCheck() check {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return check{Name: "child subreaper", Detail: os.NewSyscallError("prctl", err).Error()}
	}
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	return check{Name: "child subreaper", OK: true, Detail: "PR_SET_CHILD_SUBREAPER works"}
}
