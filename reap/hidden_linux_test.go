package reap_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/reap"
)

const nobody = 65534

func init() { testproc.Register("reap-hidden", helperReapHidden) }

// TestSpawnerUnreadable: a reaper that cannot read the spawner (another user's process, under a
// /proc mounted with hidepid=2) keeps the row as spawner-unknown, though the row's own process is
// proven and its spawner recorded exactly, by start ticks and pidfs id.
func TestSpawnerUnreadable(t *testing.T) {
	testproc.RequireRoot(t)
	spawner := testproc.Start(t, exec.Command("cat")) // root's: hidden from nobody
	orphanCmd := exec.Command("cat")
	orphanCmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	orphan := testproc.Start(t, orphanCmd)
	// With pidfs ids where the kernel has them: a pidfd opens on a hidden process, and would call
	// it alive; hidden, it must stay unknown.
	incS, err1 := procid.ReadExact(spawner.Process.Pid)
	incO, err2 := procid.ReadExact(orphan.Process.Pid)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	row := ledger.NewRow(incO, incS)
	if procid.PidfsError() == nil && (row.SpawnerPidfdID == nil || row.PidfdID == nil) {
		t.Fatalf("row without pidfs ids: %v, %v", row.PidfdID, row.SpawnerPidfdID)
	}
	row.Purpose, row.Reapable = "serve", &[]bool{true}[0]
	dir := t.TempDir()
	led := filepath.Join(dir, "spawn-ledger.json")
	if _, err := ledger.Open(led).Add(t.Context(), row); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir, led} { // t.TempDir's parent too: it is 0700
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	cmd := testproc.Helper(t, "reap-hidden", led, strconv.Itoa(incS.PID))
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // a private proc mount
	h := testproc.Start(t, cmd)
	f := h.Expect("decision ", 30*time.Second)
	if len(f) < 3 || f[0] != "keep" || f[1] != reap.SpawnerUnknown {
		t.Fatalf("decision as nobody under hidepid=2: %v; want keep %s", f, reap.SpawnerUnknown)
	}
	if _, err := procid.Read(orphan.Process.Pid); err != nil {
		t.Errorf("the orphan was touched: %v", err)
	}
}

// helperReapHidden mounts a proc with hidepid=2, becomes nobody, and decides the ledger's row. It
// prints "decision <action> <reason> <spawner read error>".
func helperReapHidden(args []string) int {
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "hidepid=2"); err != nil {
		fmt.Println("skip cannot mount proc with hidepid=2:", err)
		return 0
	}
	if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(nobody), syscall.Setuid(nobody)); err != nil {
		fmt.Println("skip cannot become nobody:", err)
		return 0
	}
	spawner, _ := strconv.Atoi(args[1])
	_, readErr := procid.Read(spawner)
	if readErr == nil || errors.Is(readErr, procid.ErrGone) {
		fmt.Println("decision unexpected-read", readErr)
		return 0
	}
	rows, err := ledger.Peek(args[0])
	if err != nil || len(rows) != 1 {
		fmt.Println("decision error", rows, err)
		return 0
	}
	d := reap.Decide(rows)[0]
	fmt.Printf("decision %s %s %q\n", d.Action, d.Reason, readErr)
	return 0
}
