package custody_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/supervise"
)

// TestStartFailures fails an owned start at every step, with the ledger's real faults and, after
// the child started, with injected ones: Start returns an error and never panics, nothing the
// start began survives it (the child, its grandchild, the lock), and a start that fails for a
// held lock never ran the child.
func TestStartFailures(t *testing.T) {
	testproc.RequireRoot(t) // another user's symlink, tmpfs mounts, reading every /proc/PID/environ
	type failure struct {
		name   string
		locked bool
		make   func(t testing.TB, path string)
		step   string // the injected fault's step, for the steps the OS cannot fail on demand
	}
	var cases []failure
	for _, f := range testproc.LedgerFaults() {
		cases = append(cases, failure{name: f.Name, locked: f.Locked, make: f.Make})
	}
	for _, step := range []string{"attach", "handle", "cover", "record"} {
		cases = append(cases, failure{name: step + " fails", step: step})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state", "spawn-ledger.json")
			if tc.make != nil {
				tc.make(t, path)
			}
			injected := errors.New("injected fault")
			if tc.step != "" {
				custody.FailStartAt(t, tc.step, injected)
			}
			l := ledger.Open(path)
			l.LockTimeout = 300 * time.Millisecond
			o := &custody.Owner{Ledger: l, Supervisor: &supervise.Client{Grace: time.Second}}
			defer o.Supervisor.Close()
			mark := testproc.Mark()
			testproc.CleanupMarked(t, mark)
			ran := filepath.Join(t.TempDir(), "ran")
			cmd := testproc.Helper(t, "worker", "-grandchild")
			cmd.Env = append(cmd.Env, mark, "WORKER_RAN="+ran)
			in, _ := cmd.StdinPipe()
			defer in.Close()

			c, err := startNoPanic(o, cmd)
			if err == nil {
				c.Signal(os.Kill)
				c.Wait()
				t.Fatalf("start succeeded")
			}
			t.Logf("start: %v", err)
			if ledger.IsLocked(err) != tc.locked {
				t.Errorf("IsLocked(%v) = %v, want %v", err, !tc.locked, tc.locked)
			}
			if tc.step != "" && !errors.Is(err, injected) {
				t.Errorf("error %v does not wrap the injected fault", err)
			}
			testproc.NoSurvivors(t, mark, 5*time.Second)
			if _, err := os.Stat(ran); tc.locked && err == nil {
				t.Errorf("the start failed for a held lock, but the child ran")
			}
			if tc.locked {
				return
			}
			// The lock is free again, and no row names a child of the failed start.
			if tc.make == nil {
				rows, err := l.Rows(context.Background())
				if err != nil || len(rows) != 0 {
					t.Errorf("rows after the failed start: %v, %v", rows, err)
				}
			}
			if err := l.CheckLock(context.Background(), 100*time.Millisecond); err != nil {
				t.Errorf("lock after the failed start: %v", err)
			}
		})
	}
}

// startNoPanic is o.Start, with a panic turned into an error.
func startNoPanic(o *custody.Owner, cmd *exec.Cmd) (c *custody.Child, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("start panicked: %v", p)
		}
	}()
	return o.Start(context.Background(), cmd, custody.StartOptions{})
}
