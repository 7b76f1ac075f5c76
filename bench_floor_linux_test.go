package custody_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/scope"
)

// floorCgroup makes a directory beside the owners' directories for the floor's cgroups and returns
// it, or "" on the process-group path.
func floorCgroup(b *testing.B) string {
	k, where, _ := scope.Containment()
	if k != scope.KindCgroup {
		return ""
	}
	dir, err := os.MkdirTemp(where, "bench-floor-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.Remove(dir) })
	return dir
}

// floorStartInCgroup times a plain start of /bin/true with Setpgid, born in a cgroup of its own
// made in dir before the timing and removed after its exit, as an owner's child is: what the
// kernel charges for a birth into a new cgroup, and for the removal of the one before.
func floorStartInCgroup(b *testing.B, dir string) time.Duration {
	cg, err := os.MkdirTemp(dir, "s")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(cg)
	fd, err := syscall.Open(cg, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(fd)
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
