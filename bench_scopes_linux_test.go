package custody_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.RegisterBenchmark("bench-owner", helperBenchOwner) }

// scopeTree is each scope's program: a shell that starts a cat (the grandchild) and becomes a
// cat itself, both reading the lifeline, after printing "<grandchild> <child>". Each exits on
// SIGTERM. (A background command's stdin is /dev/null in a shell without job control, before its
// own redirections: the lifeline goes through fd 3.)
const scopeTree = `exec 3<&0; cat <&3 3<&- & echo $! $$; exec cat 3<&-`

// helperBenchOwner owns args[0] scopes, each a scopeTree, prints "ready" and waits to be killed.
func helperBenchOwner(args []string) int {
	n, _ := strconv.Atoi(args[0])
	o := &custody.Owner{Ledger: ledger.Open(args[1]), Supervisor: &supervise.Client{Grace: 3 * time.Second}}
	for range n {
		cmd := exec.Command("sh", "-c", scopeTree)
		cmd.Stdin, cmd.Stdout = os.Stdin, os.Stdout
		if _, err := o.Start(context.Background(), cmd, custody.StartOptions{Purpose: "serve"}); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	fmt.Println("ready")
	select {}
}

// BenchmarkOwnerDeathScopes measures the time from an owner's SIGKILL to the exit of every process
// in N scopes, each a child with a grandchild (a shell that starts a cat and becomes a cat), as
// pidfds report the exits. It runs per containment: cgroup (the supervisor SIGTERMs each cgroup's
// members through pidfds, waits on cgroup.events, then cgroup.kill) and process-group (the
// supervisor SIGTERMs each group). The baseline=direct-kill runs are the floor: the benchmark
// starts the same trees itself, each in a process group, and SIGTERMs the groups itself (no owner,
// no supervisor, no identity check).
func BenchmarkOwnerDeathScopes(b *testing.B) {
	for _, n := range []int{20, 1000} {
		for _, c := range containments() {
			b.Run(fmt.Sprintf("scopes=%d/containment=%s", n, c), func(b *testing.B) {
				b.Setenv(scope.EnvContainment, c)
				benchScopesDeath(b, n)
			})
		}
		b.Run(fmt.Sprintf("scopes=%d/baseline=direct-kill", n), func(b *testing.B) { benchScopesDirect(b, n) })
	}
}

func benchScopesDeath(b *testing.B, n int) {
	var ds []time.Duration
	b.StopTimer()
	for range b.N {
		r, w, err := os.Pipe() // the lifeline
		if err != nil {
			b.Fatal(err)
		}
		cmd := testproc.Helper(b, "bench-owner", strconv.Itoa(n), b.TempDir()+"/l.json")
		cmd.Stdin, cmd.Stderr = r, os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		r.Close()
		fds := readTrees(b, out, n, true)
		b.StartTimer()
		start := time.Now()
		cmd.Process.Kill()
		waitAll(b, fds)
		ds = append(ds, time.Since(start))
		b.StopTimer()
		cmd.Wait()
		w.Close()
	}
	reportP50(b, ds)
}

func benchScopesDirect(b *testing.B, n int) {
	var ds []time.Duration
	b.StopTimer()
	for range b.N {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		var cmds []*exec.Cmd
		for range n {
			cmd := exec.Command("sh", "-c", scopeTree)
			cmd.Stdin, cmd.Stdout = r, pw
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		pw.Close()
		r.Close()
		fds := readTrees(b, pr, n, false)
		b.StartTimer()
		start := time.Now()
		for _, cmd := range cmds {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // our unreaped children: ids are stable
		}
		waitAll(b, fds)
		ds = append(ds, time.Since(start))
		b.StopTimer()
		for _, cmd := range cmds {
			cmd.Wait()
		}
		w.Close()
		pr.Close()
	}
	reportP50(b, ds)
}

// readTrees reads n "<grandchild> <child>" lines (and "ready" when owned) and opens a pidfd on each
// process.
func readTrees(b *testing.B, out io.Reader, n int, owned bool) []int {
	sc := bufio.NewScanner(out)
	var fds []int
	for trees, ready := 0, !owned; trees < n || !ready; {
		if !sc.Scan() {
			b.Fatalf("the trees' output ended: %v", sc.Err())
		}
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "ready":
			ready = true
		case len(f) == 2:
			for _, s := range f {
				pid, _ := strconv.Atoi(s)
				fd, err := unix.PidfdOpen(pid, 0)
				if err != nil {
					b.Fatalf("pidfd_open %d: %v", pid, err)
				}
				fds = append(fds, fd)
			}
			trees++
		default:
			b.Fatalf("tree said %q", sc.Text())
		}
	}
	return fds
}

// waitAll waits until every pidfd reports its process's exit, and closes them.
func waitAll(b *testing.B, fds []int) {
	deadline := time.Now().Add(30 * time.Second)
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for len(pfds) > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%d processes still run", len(pfds))
		}
		if _, err := unix.Poll(pfds, 1000); err != nil && err != unix.EINTR {
			b.Fatal(err)
		}
		live := pfds[:0]
		for _, p := range pfds {
			if p.Revents == 0 {
				live = append(live, unix.PollFd{Fd: p.Fd, Events: unix.POLLIN})
			} else {
				unix.Close(int(p.Fd))
			}
		}
		pfds = live
	}
}

func reportP50(b *testing.B, ds []time.Duration) {
	b.ReportMetric(float64(median(ds))/1e6, "p50-ms")
	b.ReportMetric(0, "ns/op")
}
