package authority_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// acquireKillWait proves authority over a live helper, kills it through the handle and sees the
// exit through the handle.
func acquireKillWait(t *testing.T, wantPinned bool) {
	c := startHelper(t, "sleep", nil)
	inc := c.incarnation()
	p, err := authority.Acquire(exactRecord(inc))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer p.Close()
	if p.PID() != inc.PID || !sameID(p.ID(), inc.ID) {
		t.Errorf("PID, ID = %d, %v; want %d, %v", p.PID(), p.ID(), inc.PID, inc.ID)
	}
	if p.Pinned() != wantPinned {
		t.Errorf("Pinned() = %v, want %v", p.Pinned(), wantPinned)
	}
	if exited, err := p.Exited(); err != nil || exited {
		t.Fatalf("Exited() before the kill = %v, %v; want false, nil", exited, err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := p.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if exited, err := p.Exited(); err != nil || !exited {
		t.Errorf("Exited() after Wait = %v, %v; want true, nil", exited, err)
	}
	c.waitExit()
	err = p.Kill()
	mustIs(t, err, procid.ErrGone)
	mustNotIs(t, err, authority.ErrNoAuthority)
}

func TestAcquireKillWait(t *testing.T) {
	acquireKillWait(t, runtime.GOOS != "darwin")
}

func TestAcquireWrongStartRefusesAndSpares(t *testing.T) { wrongStartRefusesAndSpares(t) }

func wrongStartRefusesAndSpares(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	inc := c.incarnation()
	rec := exactRecord(inc)
	rec.StartTicks = ptr(inc.Start + 1)
	p, err := authority.Acquire(rec)
	if err == nil {
		p.Close()
		t.Fatalf("Acquire with a wrong start succeeded")
	}
	t.Logf("Acquire: %v", err)
	mustIs(t, err, authority.ErrNoAuthority, procid.ErrReused)
	mustNotIs(t, err, procid.ErrGone, os.ErrPermission)
	c.assertAlive()
	c.stop()
}

func TestAcquireExitedIsGone(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	inc := c.incarnation()
	c.stop() // exited and reaped
	_, err := authority.Acquire(exactRecord(inc))
	t.Logf("Acquire: %v", err)
	mustIs(t, err, procid.ErrGone)
	mustNotIs(t, err, authority.ErrNoAuthority)
}

func TestAcquireByCreateTime(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	inc := c.incarnation()
	for _, tc := range []struct {
		name   string
		create *float64
		want   error // nil: authority
	}{
		{"exact", ptr(inc.CreateTime), nil},
		{"within 2s", ptr(inc.CreateTime - 1.9), nil},
		{"2.5s off", ptr(inc.CreateTime + 2.5), authority.ErrNoAuthority},
		{"null", nil, authority.ErrNoAuthority},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := authority.Acquire(procid.Record{PID: inc.PID, CreateTime: tc.create})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if !sameID(p.ID(), inc.ID) {
					t.Errorf("ID() = %v, want %v", p.ID(), inc.ID)
				}
				p.Close()
				return
			}
			if err == nil {
				p.Close()
				t.Fatalf("Acquire succeeded, want %v", tc.want)
			}
			t.Logf("Acquire: %v", err)
			mustIs(t, err, tc.want)
			mustNotIs(t, err, procid.ErrGone)
			if tc.create == nil && !strings.Contains(err.Error(), "null create time") {
				t.Errorf("error %q does not name the null create time", err)
			}
		})
	}
	c.assertAlive()
	c.stop()
}

func TestAcquireBadPID(t *testing.T) {
	for _, pid := range []int{0, -1} {
		_, err := authority.Acquire(procid.Record{PID: pid, CreateTime: ptr(1.0)})
		mustIs(t, err, authority.ErrNoAuthority)
	}
}

func TestWaitDeadlineThenExit(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	p, err := authority.Acquire(exactRecord(c.incarnation()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Wait(waitCtx(t, 20*time.Millisecond))
	mustIs(t, err, context.DeadlineExceeded)
	c.assertAlive()
	c.stdin.Close() // it exits on its own: the exit is seen through the handle, unsignalled
	if err := p.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.waitExit()
}

func TestClose(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	p, err := authority.Acquire(exactRecord(c.incarnation()))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait(context.Background()) }()
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-waited:
		mustIs(t, err, os.ErrClosed)
	case <-time.After(30 * time.Second):
		t.Fatal("a pending Wait did not return after Close")
	}
	mustIs(t, p.Kill(), os.ErrClosed)
	_, err = p.Exited()
	mustIs(t, err, os.ErrClosed)
	mustIs(t, p.Wait(context.Background()), os.ErrClosed)
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	c.assertAlive()
	c.stop()
}

func TestFromOS(t *testing.T) { fromOS(t) }

// fromOS wraps a child; its spawn-time authority is pinned in every mode.
func fromOS(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	wrapped(t, c, authority.FromOS)
	_, err := authority.FromOS(c.cmd.Process) // waited for: gone, or without a handle on Windows
	t.Logf("FromOS after Wait: %v", err)
	if runtime.GOOS == "windows" {
		mustIs(t, err, authority.ErrNoAuthority)
	} else {
		mustIs(t, err, procid.ErrGone)
	}
}

// TestFromChild: a child wrapped with the incarnation its spawner read keeps that ID and is
// pinned; an incarnation of another PID is refused.
func TestFromChild(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	inc := c.incarnation()
	if _, err := authority.FromChild(c.cmd.Process, procid.ID{PID: inc.PID + 1, Start: inc.Start}); err == nil {
		t.Errorf("FromChild took pid %d's incarnation for pid %d", inc.PID+1, inc.PID)
	}
	wrapped(t, c, func(p *os.Process) (*authority.Process, error) { return authority.FromChild(p, inc.ID) })
}

// wrapped wraps c's child with wrap, checks that the Process has its incarnation and is pinned,
// kills it through the Process and sees it exit.
func wrapped(t *testing.T, c *child, wrap func(*os.Process) (*authority.Process, error)) {
	t.Helper()
	inc := c.incarnation()
	p, err := wrap(c.cmd.Process)
	if err != nil {
		t.Fatalf("wrap: %v", err)
	}
	defer p.Close()
	if !sameID(p.ID(), inc.ID) || !p.Pinned() {
		t.Errorf("ID, Pinned = %v, %v; want %v, true", p.ID(), p.Pinned(), inc.ID)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := p.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	c.waitExit()
}

func TestPidfdErrorOutsideLinux(t *testing.T) {
	if runtime.GOOS == "linux" {
		t.Skip("skipping: Linux has pidfd; see TestPidfdProbe")
	}
	if err := authority.PidfdError(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("PidfdError() = %v, want errors.ErrUnsupported", err)
	}
}

// BenchmarkAcquire measures proven authority over a live PID: open the handle, prove the
// incarnation through a fresh read, close. An exact record needs one read; a record with only a
// create time needs two (the ID is read before the proof, see prove); a record with a pidfs id
// needs none (the handle's id is the proof). pidfd-floor, beside them, is the bare pidfd_open,
// fstat, poll and close on the same PID (Linux).
func BenchmarkAcquire(b *testing.B) {
	c := startHelper(b, "sleep", nil)
	inc := c.incarnation()
	for _, bc := range []struct {
		name string
		rec  procid.Record
	}{
		{"exact", exactRecord(inc)},
		{"pidfs-id", pidfsRecord(inc)}, // what custody writes on Linux 6.9+: start ticks and pidfs id
		{"create-time", procid.Record{PID: inc.PID, CreateTime: &inc.CreateTime}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := authority.Acquire(bc.rec)
				if err != nil {
					b.Fatal(err)
				}
				p.Close()
			}
		})
	}
	if procid.PidfsError() == nil {
		b.Run("pidfd-floor", func(b *testing.B) {
			for b.Loop() {
				if err := testproc.PidfdProbe(inc.PID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	c.stop()
}
