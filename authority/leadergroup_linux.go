package authority

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/procid"
)

// groupFlagBroken is set once the kernel refuses PIDFD_SIGNAL_PROCESS_GROUP (before Linux 6.9).
var groupFlagBroken atomic.Bool

// signalGroup sends sig to the process group p leads, through p's pidfd with
// PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9): the kernel takes the group from the leader's own struct
// pid, so the signal reaches the group p led, even after p exited, and no other whatever has
// become of the number since. No identity check is needed at signal time.
func (p *Process) signalGroup(sig os.Signal) error {
	s, err := unixSignal(sig)
	if err != nil {
		return err
	}
	if p.sys.pidfd == nil || groupFlagBroken.Load() {
		return fmt.Errorf("authority: signal group of pid %d through a pidfd: %w", p.id.PID, errors.ErrUnsupported)
	}
	var sigErr error
	if err := p.control(func(fd uintptr) {
		sigErr = unix.PidfdSendSignal(int(fd), s, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	}); err != nil {
		return p.errClosed("signal group")
	}
	switch sigErr {
	case nil:
		return nil
	case unix.EINVAL: // the signal is valid: the flag is what this kernel does not know
		groupFlagBroken.Store(true)
		return fmt.Errorf("authority: signal group of pid %d through a pidfd: %w", p.id.PID, errors.ErrUnsupported)
	case unix.ESRCH:
		return fmt.Errorf("authority: signal group of pid %d: no process left: %w", p.id.PID, procid.ErrGone)
	}
	return fmt.Errorf("authority: signal group of pid %d: %w", p.id.PID, os.NewSyscallError("pidfd_send_signal", sigErr))
}
