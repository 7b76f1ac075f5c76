package supervise_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// lastResort kills a test's direct child if the test process dies. Pdeathsig fires when the
// thread that started the child exits, so it is a net, not a mechanism.
func lastResort(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// becomeReaper makes this test process the subreaper of its descendants: an owner the test kills
// leaves its supervisor and children to the test, which reaps them and can then prove that none
// is left a zombie. Without it they go to PID 1, which here (a container's init) may never reap.
func becomeReaper() error {
	return os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
}

// reapOrphan reaps id if it was reparented to this test and has exited. ECHILD means it is not
// (or no longer) our child: its own parent reaps it.
func reapOrphan(tb testing.TB, id procid.ID) {
	tb.Helper()
	if reaperErr != nil || !present(id) {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(id.PID, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD, pid == id.PID:
			return
		case err != nil:
			tb.Errorf("wait4 %d: %v", id.PID, err)
			return
		}
		if time.Now().After(deadline) {
			tb.Errorf("orphan %v not reaped within 10s", id)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// zombie reports whether id's process is a zombie now (read from /proc/PID/stat directly:
// procid reports zombies as gone).
func zombie(id procid.ID) bool {
	state, start, ok := stat(id.PID)
	return ok && start == id.Start && state == 'Z'
}

// present reports whether id's process exists now in any state, zombie included.
func present(id procid.ID) bool {
	_, start, ok := stat(id.PID)
	return ok && start == id.Start
}

func stat(pid int) (state byte, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 20 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	return f[0][0], start, err == nil
}

// rss returns a process's resident set size in KiB (VmRSS).
func rss(pid int) (int, error) { return statusKiB(pid, "VmRSS:") }

// anonymous returns a process's anonymous resident pages in KiB (Anonymous in
// /proc/PID/smaps_rollup, Linux 4.14+): its private memory, without the file pages it shares.
func anonymous(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, err
	}
	return fieldKiB(b, "Anonymous:")
}

// peakRSS returns a process's peak resident set size in KiB (VmHWM).
func peakRSS(pid int) (int, error) { return statusKiB(pid, "VmHWM:") }

func statusKiB(pid int, key string) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return fieldKiB(b, key)
}

// fieldKiB returns the value of the "key  N kB" line of a /proc file's text b.
func fieldKiB(b []byte, key string) (int, error) {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			return strconv.Atoi(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))))
		}
	}
	return 0, errors.New("no " + key + " in the /proc file")
}

// watcher observes the exit of many processes at once through pidfds: precise to the
// microsecond, where polling /proc would measure its own interval.
type watcher struct {
	fds []unix.PollFd
	ids []procid.ID
}

// watch opens a pidfd per incarnation and proves, through it, that it is still that one.
func watch(tb testing.TB, ids []procid.ID) *watcher {
	tb.Helper()
	w := &watcher{}
	for _, id := range ids {
		fd, err := unix.PidfdOpen(id.PID, 0)
		if err != nil {
			requireCapability(tb, "pidfd_open", err)
		}
		if err := id.Verify(); err != nil {
			unix.Close(fd)
			tb.Fatalf("watch %v: %v", id, err)
		}
		w.fds = append(w.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		w.ids = append(w.ids, id)
	}
	tb.Cleanup(w.close)
	return w
}

// wait waits until every watched process has exited, or returns the survivors' error.
func (w *watcher) wait(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	fds := append([]unix.PollFd(nil), w.fds...)
	for len(fds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%d of %d processes still running after %v", len(fds), len(w.fds), timeout)
		}
		_, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if err != nil && err != unix.EINTR {
			return os.NewSyscallError("poll", err)
		}
		n := 0
		for _, p := range fds {
			if p.Revents == 0 {
				fds[n] = p
				n++
			}
		}
		fds = fds[:n]
	}
	return nil
}

func (w *watcher) close() {
	for _, p := range w.fds {
		unix.Close(int(p.Fd))
	}
	w.fds = nil
}
