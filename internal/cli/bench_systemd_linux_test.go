package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/sdunit"
	"github.com/custody-dev/custody/internal/testproc"
)

func init() {
	// sd-roundtrip N asks the user manager N times, each on a new connection as one custody run
	// would, for a delegated scope holding a new sleep(1), and prints the mean nanoseconds of the
	// connection, of the scope's start (the move included) and of the Delegate read-back.
	testproc.RegisterBenchmark("sd-roundtrip", func(args []string) int {
		n, _ := strconv.Atoi(args[0])
		var dial, start, back time.Duration
		for i := range n {
			sleep := exec.Command("sleep", "100")
			if err := sleep.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t0 := time.Now()
			c, err := sdunit.Dial(ctx)
			t1 := time.Now()
			if err == nil {
				err = c.StartScope(ctx, fmt.Sprintf("custody-bench-%d-%d.scope", os.Getpid(), i), sleep.Process.Pid)
			}
			t2 := time.Now()
			if err == nil {
				_, err = c.Delegated(ctx, fmt.Sprintf("custody-bench-%d-%d.scope", os.Getpid(), i))
				c.Close()
			}
			t3 := time.Now()
			cancel()
			sleep.Process.Kill()
			sleep.Wait()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			dial, start, back = dial+t1.Sub(t0), start+t2.Sub(t1), back+t3.Sub(t2)
		}
		fmt.Println(int64(dial)/int64(n), int64(start)/int64(n), int64(back)/int64(n))
		return 0
	})
}

// BenchmarkSystemdStart: one custody run -- true as the test user, from the moment it is let go
// to its exit, through each way of having a cgroup, the three interleaved in each round so that
// the machine's load weighs on each alike: a cgroup the user may write and that no systemd unit
// holds (the floor: no D-Bus at all), a transient scope asked of the user manager (custody run
// in an undelegated unit's cgroup, the client cgroup), and a transient service running custody
// agent (custody run in a root-owned cgroup). Each process waits for its go on stdin in its
// cgroup, so that the tool's start as the user and the move are not timed. Each run pays its own
// D-Bus connection and unit, as custody run does; dbus-roundtrip is that round trip alone, in ns
// of dial, start and read-back.
func BenchmarkSystemdStart(b *testing.B) {
	m := startUserManager(b)
	led := filepath.Join(m.dir, "state", "l.json")
	run := []string{"exec", "sh", "-c", `echo waiting $$; read x; exec "$@"`, "sh",
		"env", testproc.Env("custody"), m.exe, "--ledger", led, "run", "--", "true"}
	// start times one custody run, moved first by move when it is given.
	start := func(b *testing.B, move func(pid int)) time.Duration {
		p := testproc.Start(b, m.command(b, run...))
		pid := atoi(p.Expect("waiting ", 20*time.Second)[0])
		if move != nil {
			move(pid)
		}
		t0 := time.Now()
		fmt.Fprintln(p.Stdin(), "go")
		if err := p.Wait(); err != nil {
			b.Fatalf("custody run: %v", err)
		}
		return time.Since(t0)
	}
	b.Run("interleaved", func(b *testing.B) {
		floor := "" // a user-owned sibling of the client cgroup, named like no unit
		toFloor := func(pid int) {
			if floor == "" {
				floor = userCgroupBeside(b, pid, m.uid)
			}
			if err := os.WriteFile(filepath.Join(floor, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				b.Fatal(err)
			}
		}
		var writable, scope, service time.Duration
		n := 0
		for b.Loop() {
			writable += start(b, toFloor)
			scope += start(b, nil)
			service += start(b, func(pid int) { moveToRootCgroup(b, pid) })
			n++
		}
		b.ReportMetric(float64(writable.Nanoseconds())/float64(n), "writable-ns/op")
		b.ReportMetric(float64(scope.Nanoseconds())/float64(n), "scope-ns/op")
		b.ReportMetric(float64(service.Nanoseconds())/float64(n), "service-ns/op")
		b.ReportMetric(float64(scope)/float64(writable), "scope/writable")
		b.ReportMetric(float64(service)/float64(writable), "service/writable")
	})
	b.Run("dbus-roundtrip", func(b *testing.B) {
		out, err := m.command(b, "exec", "env", testproc.Env("sd-roundtrip"), m.exe, strconv.Itoa(b.N)).CombinedOutput()
		if err != nil {
			b.Fatalf("sd-roundtrip: %v\n%s", err, out)
		}
		var dial, start, back float64
		if _, err := fmt.Sscan(string(out), &dial, &start, &back); err != nil {
			b.Fatalf("sd-roundtrip: %q: %v", out, err)
		}
		b.ReportMetric(dial, "dial-ns/op")
		b.ReportMetric(start, "start-ns/op")
		b.ReportMetric(back, "readback-ns/op")
	})
}

// userCgroupBeside makes a cgroup owned by uid beside pid's, delegated as a user's subtree is
// (the directory and its procs, threads and subtree_control files), and returns its path.
func userCgroupBeside(b *testing.B, pid, uid int) string {
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		b.Fatal(err)
	}
	client := strings.TrimSpace(string(cg[strings.LastIndex(string(cg), "0::")+3:]))
	dir := filepath.Join(cgroup2Of(b), filepath.Dir(client), "custody-bench-floor")
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		b.Fatal(err)
	}
	b.Cleanup(func() { removeCgroups(dir) })
	for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(dir, f), uid, uid); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}
