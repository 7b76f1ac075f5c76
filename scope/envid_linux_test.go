package scope_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
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

// BenchmarkFindStrays is one sweep over 1,000 processes of the caller's user besides the
// machine's own: carriers=0 reads every environment block and proves nothing; carriers=1000
// proves and holds each of them with a pidfd.
func BenchmarkFindStrays(b *testing.B) {
	id := scope.NewEnvID()
	for _, carriers := range []int{0, 1000} {
		b.Run(fmt.Sprintf("procs=1000/carriers=%d", carriers), func(b *testing.B) {
			env := append(os.Environ(), scope.EnvScopeID+"="+scope.NewEnvID())
			for i := range 1000 {
				e := env
				if i < carriers {
					e = append(env[:len(env):len(env)], scope.EnvScopeID+"="+id)
				}
				startCarrier(b, e, nil)
			}
			for b.Loop() {
				s, err := scope.FindStrays([]string{id}, os.Getuid())
				if err != nil {
					b.Fatal(err)
				}
				if n := s.Len(); n != carriers {
					b.Fatalf("found %d, want %d", n, carriers)
				}
				s.Close()
			}
		})
	}
}
