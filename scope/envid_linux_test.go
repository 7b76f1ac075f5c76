package scope_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// startCarrier starts a sleep in a session of its own with env, stopped by handle at cleanup.
func startCarrier(t testing.TB, env []string, cred *syscall.Credential) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "1000")
	c.Env = env
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// TestFindStrays: the sweep finds the processes of the given user that carry the id, alone
// among others in the id list, and not those that carry another id or none, nor another user's;
// a kill through the strays' handles ends them, and Wait sees it.
func TestFindStrays(t *testing.T) {
	testproc.RequireRoot(t) // to start a process of another user
	id, other := scope.NewEnvID(), scope.NewEnvID()
	carrier := startCarrier(t, []string{"PATH=/bin:/usr/bin", scope.EnvScopeID + "=" + other + "," + id}, nil)
	startCarrier(t, []string{scope.EnvScopeID + "=" + other}, nil)
	startCarrier(t, nil, nil)
	nobody := startCarrier(t, []string{scope.EnvScopeID + "=" + id}, &syscall.Credential{Uid: 65534, Gid: 65534})
	for _, c := range []struct {
		uid  int
		want int
	}{{0, carrier.Process.Pid}, {65534, nobody.Process.Pid}} {
		s, err := scope.FindStrays([]string{id}, c.uid)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.PIDs(); !slices.Equal(got, []int{c.want}) {
			t.Errorf("uid %d: strays %v, want [%d]", c.uid, got, c.want)
		}
		s.Close()
	}
	// A sweep whose group is gone and whose id nobody carries has nothing to signal: gone, as a
	// stop of it is already-exited.
	if err := scope.Sweep(nil, scope.NewEnvID(), 0).Signal(syscall.SIGKILL); !errors.Is(err, procid.ErrGone) {
		t.Fatalf("a sweep with nothing to find: %v; want procid.ErrGone", err)
	}
	w := scope.Sweep(nil, id, 0)
	defer w.Close()
	if err := w.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("signal the strays: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Wait(ctx); err != nil {
		t.Fatalf("wait for the strays: %v", err)
	}
	if ws, err := carrier.Process.Wait(); err != nil || ws.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the carrier: %v %v; want it killed", ws, err)
	}
	if err := nobody.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the other user's carrier: %v; want it alive", err)
	}
}

// BenchmarkFindStrays is one sweep with 1,000 processes of the caller's user carrying a scope id,
// besides the machine's own: carriers=0 sweeps for another id, which reads every environment
// block and proves nothing; carriers=1000 proves and holds each of them with a pidfd. The floor,
// in the same run, is the scan without the environments: /proc's names and a stat of each
// process's directory.
func BenchmarkFindStrays(b *testing.B) {
	id := scope.NewEnvID()
	env := append(os.Environ(), scope.EnvScopeID+"="+id)
	for range 1000 {
		startCarrier(b, env, nil)
	}
	b.Run("procs=1000/floor=readdir+stat", func(b *testing.B) {
		for b.Loop() {
			procStat(b)
		}
	})
	for _, c := range []struct {
		name string
		id   string
		want int
	}{{"carriers=0", scope.NewEnvID(), 0}, {"carriers=1000", id, 1000}} {
		b.Run("procs=1000/"+c.name, func(b *testing.B) {
			for b.Loop() {
				s, err := scope.FindStrays([]string{c.id}, os.Getuid())
				if err != nil {
					b.Fatal(err)
				}
				if n := s.Len(); n != c.want {
					b.Fatalf("found %d, want %d", n, c.want)
				}
				s.Close()
			}
		})
	}
}

// procStat lists /proc and stats each process's directory, as a sweep's scan does before it
// reads any environment.
func procStat(b *testing.B) {
	d, err := os.Open("/proc")
	if err != nil {
		b.Fatal(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		b.Fatal(err)
	}
	var st syscall.Stat_t
	for _, n := range names {
		if n[0] >= '0' && n[0] <= '9' {
			syscall.Stat("/proc/"+n, &st)
		}
	}
}
