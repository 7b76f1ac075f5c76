package testproc

import (
	"errors"

	"github.com/custody-dev/custody/internal/eintr"
	"golang.org/x/sys/unix"
)

// PidfdProbe is the bare cost of proving a live process by its pidfs id, the floor benchmarks
// set custody's proofs beside: pidfd_open, fstat, a zero-timeout poll and close, nothing around
// them.
func PidfdProbe(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := eintr.Retry(func() (int, error) { return unix.Poll(fds, 0) })
	if err != nil || n != 0 {
		return errors.Join(err, errors.New("poll: the process has exited"))
	}
	return nil
}
