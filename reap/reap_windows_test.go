package reap_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/reap"
	"github.com/custody-dev/custody/stop"
)

func TestMain(m *testing.M) {
	testproc.Register("window", helperWindow)
	testproc.Register("wait", helperWait)
	if err := testproc.AllowWindows(); err != nil {
		fmt.Fprintln(os.Stderr, "reap tests:", err)
		os.Exit(1)
	}
	testproc.Main(m)
}

// helperWindow is a GUI program that exits 0 on WM_CLOSE, and 3 when its lifeline (stdin) closes.
func helperWindow([]string) int {
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(3) }()
	err := testproc.RunWindow(func() { fmt.Println("ready") }, func() bool { return true })
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

// helperWait is a console program without a window: it waits for its lifeline to close.
func helperWait([]string) int {
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 3
}

func start(t *testing.T, name string) (*testproc.Proc, procid.Incarnation) {
	t.Helper()
	p := testproc.Start(t, testproc.Helper(t, name))
	p.Expect("ready", 30*time.Second)
	inc, err := procid.Read(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return p, inc
}

// TestRun reaps on Windows what a crashed spawner left: a GUI program closes on WM_CLOSE, a
// console program is killed at once (no request reaches it from another console), and a row
// whose spawner lives is kept.
func TestRun(t *testing.T) {
	ctx := context.Background()
	spawner, deadSpawner := start(t, "wait")
	spawner.Stdin().Close()
	spawner.Wait()
	liveSpawner, _ := procid.Self()

	gui, guiInc := start(t, "window")
	cons, consInc := start(t, "wait")
	kept, keptInc := start(t, "wait")
	rows := []ledger.Row{ledger.NewRow(guiInc, deadSpawner), ledger.NewRow(consInc, deadSpawner),
		ledger.NewRow(keptInc, liveSpawner)}
	l := ledger.Open(filepath.Join(testproc.TempDir(t), "ledger.json"))
	defer l.Close()
	for _, r := range rows {
		r.Purpose = "serve"
		if _, err := l.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	ds, err := reap.Run(ctx, l, reap.Options{Stop: stop.Options{Grace: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	byPID := map[int]reap.Decision{}
	for _, d := range ds {
		byPID[d.PID] = d
	}
	if d := byPID[guiInc.PID]; d.Action != reap.Reap || d.Result == nil || !d.Result.OK() ||
		d.Result.Forced || d.Result.Request != authority.AskWMClose {
		t.Errorf("GUI program: %+v %+v; want reaped on WM_CLOSE, not forced", d, d.Result)
	}
	if d := byPID[consInc.PID]; d.Action != reap.Reap || d.Result == nil || !d.Result.OK() ||
		!d.Result.Forced || d.Result.Request != "" {
		t.Errorf("console program: %+v %+v; want reaped, forced at once", d, d.Result)
	}
	if d := byPID[keptInc.PID]; d.Action != reap.Keep || d.Reason != reap.SpawnerAlive {
		t.Errorf("live spawner: %+v; want kept, %s", d, reap.SpawnerAlive)
	}
	gui.Wait()
	cons.Wait()
	if code := gui.ProcessState.ExitCode(); code != 0 {
		t.Errorf("GUI program's exit code %d; want 0, its own exit on WM_CLOSE", code)
	}
	if code := cons.ProcessState.ExitCode(); code != 1 {
		t.Errorf("console program's exit code %d; want 1, TerminateProcess's", code)
	}
	if _, err := procid.Read(kept.Process.Pid); err != nil {
		t.Errorf("the kept row's process was touched: %v", err)
	}
	left, err := l.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].PID != keptInc.PID {
		t.Errorf("rows left %v; want only pid %d's", left, keptInc.PID)
	}
}
