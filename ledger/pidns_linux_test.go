package ledger_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	testproc.NewPIDNamespace(cmd)
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
	if err := testproc.MountProc(); err != nil {
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
	b, err := testproc.ReusePID(incA.PID, incA.Start, func() (*exec.Cmd, error) {
		b := exec.Command("cat")
		b.Stdin = os.Stdin // this helper's lifeline
		return b, b.Start()
	})
	if err != nil {
		return result("reuse pid %d: %v", incA.PID, err)
	}
	defer func() { b.Process.Kill(); b.Wait() }()
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
