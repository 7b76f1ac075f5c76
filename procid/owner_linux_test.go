package procid_test

import (
	"os"
	"strings"
	"testing"

	"github.com/custody-dev/custody/procid"
)

// TestOwner: the caller runs as its own uid, and a PID without a process is gone.
func TestOwner(t *testing.T) {
	ids, err := procid.Owner(os.Getpid())
	if err != nil || !ids.Only(os.Getuid()) {
		t.Errorf("own uids %v, %v; want only uid %d", ids, err, os.Getuid())
	}
	if _, err := procid.Owner(1 << 22); err == nil {
		t.Errorf("owner of a PID above pid_max: no error")
	}
}

// TestKernelThread: kthreadd, where this PID namespace shows it, is a kernel thread; the caller
// and init are not.
func TestKernelThread(t *testing.T) {
	for _, pid := range []int{os.Getpid(), 1} {
		if procid.KernelThread(pid) {
			t.Errorf("pid %d reported as a kernel thread", pid)
		}
	}
	comm, err := os.ReadFile("/proc/2/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "kthreadd" {
		t.Logf("no kthreadd at PID 2 in this PID namespace (%q, %v): only the negative cases ran", comm, err)
		return
	}
	if !procid.KernelThread(2) {
		t.Errorf("kthreadd not reported as a kernel thread")
	}
}
