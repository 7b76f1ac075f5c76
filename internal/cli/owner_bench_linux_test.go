package cli_test

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
)

func init() {
	// bench-caller starts custody with args, its output passed on, and waits on stdin: the caller
	// BenchmarkCallerKill kills.
	testproc.RegisterBenchmark("bench-caller", func(args []string) int {
		c := exec.Command(os.Args[0], args...)
		c.Env = append(os.Environ(), testproc.Env("custody"))
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			return 1
		}
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
}

// BenchmarkCallerKill: SIGKILL of custody run's caller until the child's scope (a shell and a
// background sleep, in a cgroup as root) is gone, against SIGKILL of custody run itself until the
// same scope is gone, interleaved in each iteration so that a loaded machine weighs on both alike.
// The first is custody run seeing its owner's end (pidfd) and stopping the scope itself; the
// second its supervisor seeing custody's end. "Gone" is both processes' pidfds readable, polled
// without a period. caller-ms and self-ms are medians; ratio is caller-ms / self-ms.
func BenchmarkCallerKill(b *testing.B) {
	led := b.TempDir() + "/spawn-ledger.json"
	script := []string{"sh", "-c", "sleep 1000 & echo pids $$ $!; wait"}
	run := append([]string{"--ledger", led, "run", "--grace", "1s", "--"}, script...)
	// killed starts cmd, reads the scope's PIDs, SIGKILLs victim (cmd itself, or the custody it
	// started) and returns how long the scope took to be gone.
	killed := func(cmd *exec.Cmd) time.Duration {
		cmd.Stderr = io.Discard // custody run's line on its owner's end, each iteration
		p := testproc.Start(b, cmd)
		var fds []unix.PollFd
		for _, s := range p.Expect("pids ", 30*time.Second) {
			fd, err := unix.PidfdOpen(atoi(s), 0)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fd)
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
		t0 := time.Now()
		p.Process.Signal(unix.SIGKILL)
		for pending := fds; len(pending) > 0; {
			if _, err := unix.Poll(pending, 30_000); err != nil && err != unix.EINTR {
				b.Fatal(err)
			}
			var left []unix.PollFd
			for _, f := range pending {
				if f.Revents&unix.POLLIN == 0 {
					left = append(left, unix.PollFd{Fd: f.Fd, Events: unix.POLLIN})
				}
			}
			if time.Since(t0) > 30*time.Second {
				b.Fatalf("the scope outlived 30 s after the SIGKILL")
			}
			pending = left
		}
		d := time.Since(t0)
		p.Stdin().Close()
		p.Wait()
		return d
	}
	var viaCaller, viaSelf []time.Duration
	for b.Loop() {
		viaCaller = append(viaCaller, killed(testproc.Helper(b, "bench-caller", run...)))
		viaSelf = append(viaSelf, killed(testproc.Helper(b, "custody", run...)))
	}
	b.ReportMetric(0, "ns/op")
	c, s := median(viaCaller), median(viaSelf)
	b.ReportMetric(c, "caller-ms")
	b.ReportMetric(s, "self-ms")
	b.ReportMetric(c/s, "ratio")
}
