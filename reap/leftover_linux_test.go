package reap_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/reap"
	"github.com/custody-dev/custody/scope"
)

// A dead owner's cgroup directory that the ledger's rows name is removed by reap when empty, and
// kept while a process lives in one of its scopes; one no row names (another session's) is
// reported apart and left alone; a live owner's is never touched.
func TestReapLeftoverCgroups(t *testing.T) {
	kind, base, why := scope.Containment()
	if kind != scope.KindCgroup {
		testproc.Skip(t, "no cgroup containment: %v", why)
	}
	var ns unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &ns); err != nil {
		t.Fatal(err)
	}
	dead := testproc.Start(t, exec.Command("cat"))
	inc, err := procid.Read(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dead.Stdin().Close()
	dead.Wait()
	self, _ := procid.Self()
	mk := func(id procid.ID) string {
		dir := filepath.Join(base, fmt.Sprintf("custody-%d-%d-%d", ns.Ino, id.PID, id.Start))
		if err := os.MkdirAll(filepath.Join(dir, "s1"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(filepath.Join(dir, "s1")); os.Remove(dir) })
		return dir
	}
	empty := mk(inc.ID)
	alive := mk(self.ID)
	// A populated one: the dead owner's directory under another start, holding a live cat.
	busyID := procid.ID{PID: inc.PID, Start: inc.Start + 1}
	busy := mk(busyID)
	fd, err := unix.Open(filepath.Join(busy, "s1"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cat := exec.Command("cat")
	cat.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	p := testproc.Start(t, cat)
	other := mk(procid.ID{PID: inc.PID, Start: inc.Start + 2})

	rel := func(dir string) string {
		return filepath.Join("/", filepath.Base(filepath.Dir(dir)), filepath.Base(dir))
	}
	// Rows of the dead cat: one spawned by the empty directory's owner, one in the busy one's
	// scope. Nothing names the other.
	l := ledger.Open(filepath.Join(t.TempDir(), "spawn-ledger.json"))
	rows := fmt.Sprintf(`[{"pid": %d, "start_ticks": %d, "spawner_pid": %d, "spawner_start_ticks": %d},
		{"pid": %d, "start_ticks": %d, "cgroup": %q}]`, inc.PID, inc.Start, inc.PID, inc.Start, inc.PID, inc.Start, rel(busy)+"/s1")
	if err := os.WriteFile(l.Path(), []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err := reap.Run(context.Background(), l, reap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]reap.Decision{}
	for _, d := range ds {
		got[d.Cgroup] = d
	}
	if d := got[rel(other)]; d.Action != reap.Keep || d.Reason != reap.NotInLedger {
		t.Errorf("a leftover no row names: %+v (all: %+v)", d, ds)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a leftover no row names was removed: %v", err)
	}
	if d := got[rel(empty)]; d.Action != reap.Gone || d.Reason != reap.OwnerDead || d.PID != inc.PID {
		t.Errorf("empty leftover: %+v (all: %+v)", d, ds)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("empty leftover %s still there: %v", empty, err)
	}
	if d := got[rel(busy)]; d.Action != reap.Keep || d.Reason != reap.Populated {
		t.Errorf("populated leftover: %+v (all: %+v)", d, ds)
	}
	if _, ok := got[rel(alive)]; ok {
		t.Errorf("a live owner's directory was judged: %+v", got[rel(alive)])
	}
	if _, err := os.Stat(alive); err != nil {
		t.Errorf("a live owner's directory: %v", err)
	}
	if _, err := procid.Read(p.Process.Pid); err != nil {
		t.Errorf("the process in the populated leftover: %v; want it alive", err)
	}
}
