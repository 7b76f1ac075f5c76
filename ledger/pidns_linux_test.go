package ledger_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

func init() { testproc.Register("pidns-reuse", helperPIDNSReuse) }

// TestPIDReuseReadsDead: in a new PID namespace, a registered process exits and a new process is
// made to receive its PID; the row reads dead, not alive.
func TestPIDReuseReadsDead(t *testing.T) {
	testproc.RequireRoot(t)
	cmd := testproc.Helper(t, "pidns-reuse", filepath.Join(t.TempDir(), "spawn-ledger.json"))
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:   syscall.CLONE_NEWPID,
		Unshareflags: syscall.CLONE_NEWNS, // Go makes the new mount namespace private
	}
	p := testproc.Start(t, cmd)
	f := p.Expect("result ", 30*time.Second)
	if f[0] != "ok" {
		t.Fatalf("in the PID namespace: %s", strings.Join(f, " "))
	}
	t.Logf("pid %s reused: row reads %s", f[1], f[2])
}

// helperPIDNSReuse runs as PID 1 of a new PID namespace with a fresh /proc.
func helperPIDNSReuse(args []string) int {
	result := func(format string, a ...any) int {
		fmt.Printf("result "+format+"\n", a...)
		return 0
	}
	if err := syscall.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		return result("mount proc: %v", err)
	}
	l := ledger.Open(args[0])
	a := exec.Command("cat")
	a.Stdin = nil
	aIn, _ := a.StdinPipe()
	if err := a.Start(); err != nil {
		return result("start A: %v", err)
	}
	if err := register(l, a.Process.Pid, "serve"); err != nil {
		return result("register A: %v", err)
	}
	incA, _ := procid.Read(a.Process.Pid)
	aIn.Close()
	a.Wait()
	// A PID recycled within A's start tick would be indistinguishable by start time (see procid);
	// wait for the clock to pass it, polling the uptime.
	for ticksNow() <= incA.Start {
		time.Sleep(time.Millisecond)
	}
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(incA.PID-1)), 0); err != nil {
		return result("write ns_last_pid: %v", err)
	}
	b := exec.Command("cat")
	bIn, _ := b.StdinPipe()
	if err := b.Start(); err != nil {
		return result("start B: %v", err)
	}
	defer func() { bIn.Close(); b.Wait() }()
	if b.Process.Pid != incA.PID {
		return result("B got pid %d, not A's %d", b.Process.Pid, incA.PID)
	}
	rows, err := l.Rows(context.Background())
	if err != nil || len(rows) != 1 {
		return result("rows %v: %v", rows, err)
	}
	state, _ := rows[0].Record().Check(false)
	if state != procid.Dead {
		return result("row for pid %d reads %v after reuse; want dead", incA.PID, state)
	}
	if n := len(ledger.Judge(rows, ledger.Query{})); n != 0 {
		return result("query lists %d rows; want none", n)
	}
	return result("ok %d %v", incA.PID, state)
}

func ticksNow() uint64 {
	b, _ := os.ReadFile("/proc/uptime")
	up, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return uint64(up * 100)
}
