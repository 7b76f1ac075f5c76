package custody_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/scope"
)

// floorCgroup makes a cgroup beside the owners' directories for the floor's starts and returns
// its descriptor, or -1 on the process-group path.
func floorCgroup(b *testing.B) int {
	k, where, _ := scope.Containment()
	if k != scope.KindCgroup {
		return -1
	}
	dir, err := os.MkdirTemp(where, "bench-floor-")
	if err != nil {
		b.Fatal(err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		b.Fatal(err)
	}
	b.Cleanup(func() {
		syscall.Close(fd)
		os.Remove(dir)
	})
	return fd
}

// floorStartInCgroup times a plain start of /bin/true with Setpgid, born in the cgroup fd names.
func floorStartInCgroup(b *testing.B, fd int) time.Duration {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: fd}
	t := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t)
	cmd.Wait()
	return d
}
