//go:build linux || darwin

package supervise_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.RegisterBenchmark("noop", func([]string) int { return 0 }) }

// BenchmarkOwnerDeath measures the time from the owner's SIGKILL to the exit of every process in
// N covered groups of TERM-respecting children (cat, blocked on its stdin), as pidfds see it.
// sup-rss-KiB is the supervisor's resident set while it covers the N groups.
//
// The baseline=direct-kill runs put the figures in proportion on the machine at hand: the
// benchmark itself sends SIGTERM to N groups of its own children (no owner, no supervisor, no
// identity check) and measures the same thing. What remains is the kernel's cost of ending N
// processes.
func BenchmarkOwnerDeath(b *testing.B) {
	for _, n := range []int{20, 1000} {
		b.Run(fmt.Sprintf("groups=%d", n), func(b *testing.B) { benchOwnerDeath(b, n) })
		b.Run(fmt.Sprintf("groups=%d/baseline=direct-kill", n), func(b *testing.B) { benchDirectKill(b, n) })
	}
}

func benchDirectKill(b *testing.B, n int) {
	var ds []time.Duration
	b.StopTimer()
	for range b.N {
		life := newLifeline(b)
		var cmds []*exec.Cmd
		var ids []procid.ID
		for range n {
			cmd := exec.Command("cat")
			cmd.Stdin = life
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			lastResort(cmd.SysProcAttr)
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			cmds = append(cmds, cmd)
			inc, err := procid.Read(cmd.Process.Pid)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, inc.ID)
		}
		w := watch(b, ids)
		b.StartTimer()
		start := time.Now()
		for _, cmd := range cmds {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // our unreaped children: ids are stable
		}
		err := w.wait(10 * time.Second)
		ds = append(ds, time.Since(start))
		b.StopTimer()
		for _, cmd := range cmds {
			cmd.Wait()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	reportDurations(b, ds)
}

func benchOwnerDeath(b *testing.B, n int) {
	requireCapability(b, "subreaper", reaperErr)
	var ds []time.Duration
	supRSS := 0
	b.StopTimer()
	for range b.N {
		life := newLifeline(b)
		o := startOwner(b, life, "-grace", "3s")
		ids := readyIDs(b, o.call(fmt.Sprintf("spawn cat %d", n)))
		sup := supID(b, o.call("sup"))
		if kib, err := rss(sup.PID); err == nil {
			supRSS = max(supRSS, kib)
		}
		w := watch(b, ids)
		b.StartTimer()
		start := time.Now()
		o.cmd.Process.Kill()
		err := w.wait(10 * time.Second)
		d := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, d)
		o.wait(10 * time.Second)
		settle(b, append(ids, sup)...)
	}
	reportDurations(b, ds)
	if supRSS > 0 {
		b.ReportMetric(float64(supRSS), "sup-rss-KiB")
	}
}

// BenchmarkSupervisorStart measures a supervisor's cold start as its owner waits for it: from
// Client.Start to its return, here in this test binary and, as program=minimal, in the smallest
// Go program that imports custody (testdata/coldstart, built with the go command), and as
// program=custody in the custody binary (`custody supervise`, named as Client.Command). Start
// returns at the supervisor's readiness byte (it has set up and is about to read its pipe) on
// the process-group path and with a Command, so program=custody is always the time to readiness;
// the built-in supervisor on the cgroup path is only started, its readiness awaited in the
// background, and the first two are then the process's start alone. The baselines put it in
// proportion on the machine at hand: the test binary started to exit, a Go program that writes
// one byte (testdata/hello) timed to that byte, and /bin/true.
func BenchmarkSupervisorStart(b *testing.B) {
	b.Run("supervisor", func(b *testing.B) { benchClientStart(b, nil) })
	b.Run("program=minimal", func(b *testing.B) {
		bin := buildTestdata(b, "coldstart")
		out, err := exec.Command(bin, "-n", strconv.Itoa(b.N)).Output()
		if err != nil {
			b.Fatalf("coldstart: %v", err)
		}
		var ds []time.Duration
		for _, f := range strings.Fields(string(out)) {
			ns, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				b.Fatalf("coldstart printed %q", f)
			}
			ds = append(ds, time.Duration(ns))
		}
		reportDurations(b, ds)
	})
	b.Run("program=custody", func(b *testing.B) {
		benchClientStart(b, []string{buildTestdata(b, "../cmd/custody"), "supervise"})
	})
	b.Run("baseline=go-hello", func(b *testing.B) {
		bin := buildTestdata(b, "hello")
		var ds []time.Duration
		for range b.N {
			cmd := exec.Command(bin)
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			var one [1]byte
			if _, err := out.Read(one[:]); err != nil {
				b.Fatalf("hello: %v", err)
			}
			ds = append(ds, time.Since(start))
			cmd.Wait()
		}
		reportDurations(b, ds)
	})
	exe, _ := os.Executable()
	noop := testproc.Env("noop")
	for _, base := range []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"baseline=same-binary-exit", func() *exec.Cmd {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), noop)
			return cmd
		}},
		{"baseline=bin-true", func() *exec.Cmd { return exec.Command("/bin/true") }},
	} {
		b.Run(base.name, func(b *testing.B) {
			var ds []time.Duration
			for range b.N {
				cmd := base.cmd()
				start := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
			}
			reportDurations(b, ds)
		})
	}
}

// BenchmarkSupervisorRSS reports the supervisor's memory while it covers 20 groups: its resident
// set (VmRSS, rss-KiB) and, apart, what of it is the supervisor's own. anon-KiB is its anonymous
// pages (smaps_rollup's Anonymous: heap, stacks, the runtime's structures, none shared with
// another process once exec'd), the memory it costs the machine; file-KiB is the rest of the
// resident set, the pages of its executable and libraries, which the page cache shares with the
// owner and every other custody process running the same file. program=test is this test binary
// re-executed; program=custody is the custody binary (`custody supervise`, which `custody run`
// and every owner built on it start).
func BenchmarkSupervisorRSS(b *testing.B) {
	custody := buildTestdata(b, "../cmd/custody")
	b.Run("program=test", func(b *testing.B) { benchSupervisorRSS(b, nil) })
	b.Run("program=custody", func(b *testing.B) { benchSupervisorRSS(b, []string{custody, "supervise"}) })
}

func benchSupervisorRSS(b *testing.B, command []string) {
	c := &supervise.Client{Command: command}
	defer c.Close()
	life := newLifeline(b)
	var ids []procid.ID
	for range 20 {
		cmd := exec.Command("cat")
		cmd.Stdin = life
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		lastResort(cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		inc, err := procid.Read(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, inc.ID)
		if err := c.Register(supervise.Group{PGID: inc.PID, Start: inc.Start}); err != nil {
			b.Fatal(err)
		}
	}
	var kib, anon int
	for range b.N {
		var err error
		if kib, err = rss(c.PID()); err != nil {
			requireCapability(b, "/proc/PID/status", err)
		}
		if anon, err = anonymous(c.PID()); err != nil {
			requireCapability(b, "/proc/PID/smaps_rollup", err)
		}
	}
	b.ReportMetric(float64(kib), "rss-KiB")
	b.ReportMetric(float64(anon), "anon-KiB")
	b.ReportMetric(float64(kib-anon), "file-KiB")
	for _, id := range ids {
		if err := c.Unregister(id.PID); err != nil {
			b.Fatal(err)
		}
	}
}

// benchClientStart times Client.Start with the given supervisor command (nil: this binary), a
// cold start each time.
func benchClientStart(b *testing.B, command []string) {
	var ds []time.Duration
	for range b.N {
		c := &supervise.Client{Command: command}
		start := time.Now()
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		c.Close()
		b.StartTimer()
	}
	reportDurations(b, ds)
}

// buildTestdata builds the program in testdata/name (or at name, when it is a relative path) with
// the go command and returns its path.
func buildTestdata(b *testing.B, name string) string {
	b.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		b.Skipf("no go command to build testdata/%s: %v", name, err)
	}
	pkg := "./testdata/" + name
	if strings.HasPrefix(name, "../") {
		pkg = name
	}
	bin := filepath.Join(b.TempDir(), filepath.Base(name))
	if out, err := exec.Command(gocmd, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		b.Fatalf("go build testdata/%s: %v\n%s", name, err, out)
	}
	return bin
}

// reportDurations adds the median and the maximum, in milliseconds, to a benchmark's figures.
func reportDurations(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)-1])/1e6, "max-ms")
}
