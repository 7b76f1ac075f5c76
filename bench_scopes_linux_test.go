package custody_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/benchowner"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/scope"
)

func init() {
	testproc.RegisterBenchmark("bench-owner", benchowner.Main)
	testproc.RegisterBenchmark("bench-plain-owner", helperPlainOwner)
}

// helperPlainOwner starts args[0] trees (benchowner.Tree; with a ballast of args[1] MiB when given) as a
// plain Go program would (os/exec, each in a
// process group: no ledger, no scope, no supervisor), prints "ready" and waits to be killed. It
// does not wait for them (a thread per child blocked in waitid would slow its death). Its fd 3
// is the lifeline's write end, as benchowner.Main's.
func helperPlainOwner(args []string) int {
	syscall.CloseOnExec(3)
	n, _ := strconv.Atoi(args[0])
	benchowner.Ballast(args[1:])
	for range n {
		cmd := exec.Command("sh", "-c", benchowner.Tree)
		cmd.Stdin, cmd.Stdout = os.Stdin, os.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
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
// supervisor SIGTERMs each group); each also reports owner-eof-p50-ms, when the kernel had
// closed the dying owner's files (what a supervisor without the death word waits for; on Linux
// the supervisor acts at the start of the death, and the owner's own end can come after its
// scopes' last exit, which alone p50-ms times). The floors:
//   - baseline=direct-kill: the benchmark starts the same trees itself, each in a process group,
//     and SIGTERMs the groups itself (no owner, no supervisor, no identity check);
//   - baseline=direct-kill-in-cgroups: the same, each tree born in a cgroup of its own, so that
//     what the kernel spends on a process leaving its cgroup is on both sides;
//   - baseline=owner-death: the owner helper with no scope, SIGKILLed, until its files are closed
//     and its exit seen: the death no owned run can skip, at its smallest;
//   - baseline=owner-death+direct-kill: the two in turn, as a supervisor that waits for its
//     owner's files to close could at best: a plain Go program that started the same trees
//     (os/exec, a process group each, nothing of custody) is SIGKILLed, and when its files are
//     closed the benchmark SIGTERMs each group through a pidfd on its leader;
//   - baseline=owner-kill+direct-kill: the two at once, as a supervisor told of its owner's
//     death at no cost at all could: the same plain program is SIGKILLed and, straight after,
//     each group SIGTERMed, while the program's death goes on beside the trees' exits on the same
//     CPUs. What an owned run does beyond this floor is custody's.
//
// Those run one after the other, each its own sub-benchmark, and on a shared virtual machine the
// floor of one minute is not the next minute's. scopes=N/interleaved (where cgroups can be had)
// runs the owned deaths of both containments and the three floors that kill the same trees
// themselves in one loop instead, each in turn, and reports each one's p50 and the cgroup path's
// ratio over each of the others: the figures the targets are read from.
//
// The owners above hold little memory (a few MiB). At 20 scopes it runs again with owners that
// hold 64 MiB they have touched (owner-heap=64MiB: the owned runs and the two combined floors), as
// programs that own helpers often do: their death takes longer, and a supervisor that waits for
// the owner's files to close waits for all of it.
func BenchmarkOwnerDeathScopes(b *testing.B) {
	for _, n := range []int{20, 1000} {
		for _, c := range containments() {
			b.Run(fmt.Sprintf("scopes=%d/containment=%s", n, c), func(b *testing.B) {
				b.Setenv(scope.EnvContainment, c)
				benchScopesDeath(b, n, 0)
			})
		}
		b.Run(fmt.Sprintf("scopes=%d/baseline=direct-kill", n), func(b *testing.B) { benchScopesDirect(b, n, false) })
		if slices.Contains(containments(), scope.KindCgroup.Containment()) {
			b.Run(fmt.Sprintf("scopes=%d/baseline=direct-kill-in-cgroups", n), func(b *testing.B) { benchScopesDirect(b, n, true) })
		}
		b.Run(fmt.Sprintf("scopes=%d/baseline=owner-death", n), benchOwnerDeath)
		b.Run(fmt.Sprintf("scopes=%d/baseline=owner-death+direct-kill", n), func(b *testing.B) { benchOwnerDeathDirect(b, n, true, 0) })
		b.Run(fmt.Sprintf("scopes=%d/baseline=owner-kill+direct-kill", n), func(b *testing.B) { benchOwnerDeathDirect(b, n, false, 0) })
		if slices.Contains(containments(), scope.KindCgroup.Containment()) {
			b.Run(fmt.Sprintf("scopes=%d/interleaved", n), func(b *testing.B) { benchScopesInterleaved(b, n) })
		}
	}
	const heap = 64
	for _, c := range containments() {
		b.Run(fmt.Sprintf("scopes=20/owner-heap=%dMiB/containment=%s", heap, c), func(b *testing.B) {
			b.Setenv(scope.EnvContainment, c)
			benchScopesDeath(b, 20, heap)
		})
	}
	b.Run(fmt.Sprintf("scopes=20/owner-heap=%dMiB/baseline=owner-death+direct-kill", heap), func(b *testing.B) { benchOwnerDeathDirect(b, 20, true, heap) })
	b.Run(fmt.Sprintf("scopes=20/owner-heap=%dMiB/baseline=owner-kill+direct-kill", heap), func(b *testing.B) { benchOwnerDeathDirect(b, 20, false, heap) })
}

// envOwnerAt names an owner binary built from another revision (benchowner.Main at that
// revision; scripts/bench-against builds it). When set, the interleaved runs time its death too,
// its scopes process groups, as process-group-at-rev: the process-group path of that revision.
const envOwnerAt = "CUSTODY_BENCH_OWNER_AT"

// benchScopesInterleaved runs the owned deaths of both containments and the three floors that
// kill the same trees themselves in one loop (and, with $CUSTODY_BENCH_OWNER_AT, another
// revision's owner), each death of an iteration in turn and each going
// first in turn, as BenchmarkStart alternates its two starts: the sub-benchmarks above run one
// after the other, and on a shared virtual machine the floor of one minute is not the next
// minute's (the direct kill alone has ranged from 1.2 to 2.7 ms at 20 scopes between runs). It
// reports each one's median and the cgroup path's over each of the others.
func benchScopesInterleaved(b *testing.B, n int) {
	type death struct {
		name string
		die  func() time.Duration
		ds   []time.Duration
	}
	owned := func(c, at string) func() time.Duration {
		return func() time.Duration { d, _ := ownedDeath(b, n, 0, c, at); return d }
	}
	deaths := []*death{
		{name: "cgroup", die: owned(scope.KindCgroup.Containment(), "")},
		{name: "process-group", die: owned(scope.KindGroup.Containment(), "")},
		{name: "direct-kill", die: func() time.Duration { return directKill(b, n, false) }},
		{name: "direct-kill-in-cgroups", die: func() time.Duration { return directKill(b, n, true) }},
		{name: "owner-kill+direct-kill", die: func() time.Duration { d, _ := plainOwnerDeathDirect(b, n, false, 0); return d }},
	}
	if at := os.Getenv(envOwnerAt); at != "" {
		// An owner built from another revision, process groups whatever it can have: that
		// revision's process-group path, timed beside this one's.
		deaths = append(deaths, &death{name: "process-group-at-rev", die: owned(scope.KindGroup.Containment(), at)})
	}
	b.StopTimer()
	for i := range b.N {
		for j := range deaths {
			d := deaths[(i+j)%len(deaths)]
			d.ds = append(d.ds, d.die())
		}
	}
	cg := median(deaths[0].ds)
	for _, d := range deaths {
		m := median(d.ds)
		b.ReportMetric(float64(m)/1e6, d.name+"-p50-ms")
		if d != deaths[0] {
			b.ReportMetric(float64(cg)/float64(m), "cgroup/"+d.name)
		}
	}
	if at := deaths[len(deaths)-1]; at.name == "process-group-at-rev" {
		// This tree's process-group path over that revision's: what this revision's additions to
		// the path cost (the environment sweep, against a revision without it).
		b.ReportMetric(float64(median(deaths[1].ds))/float64(median(at.ds)), "process-group/process-group-at-rev")
	}
	b.ReportMetric(0, "ns/op")
}

// benchOwnerDeathDirect is the combined floors: see BenchmarkOwnerDeathScopes. afterEOF waits
// for the owner's files to close before the SIGTERMs; otherwise they follow its SIGKILL at once.
// The owner holds heap MiB.
func benchOwnerDeathDirect(b *testing.B, n int, afterEOF bool, heap int) {
	var ds, owner []time.Duration
	b.StopTimer()
	for range b.N {
		d, eof := plainOwnerDeathDirect(b, n, afterEOF, heap)
		ds, owner = append(ds, d), append(owner, eof)
	}
	reportP50(b, ds)
	if afterEOF {
		b.ReportMetric(float64(median(owner))/1e6, "owner-eof-p50-ms")
	}
}

// plainOwnerDeathDirect is one death of benchOwnerDeathDirect, timed (the benchmark's timer runs
// around the kill only): the trees' last exit and when the owner's files closed.
func plainOwnerDeathDirect(b *testing.B, n int, afterEOF bool, heap int) (last, owner time.Duration) {
	r, w, err := os.Pipe() // the trees' lifeline
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	cmd, out, eof := startOwnerHelper(b, "bench-plain-owner", []string{strconv.Itoa(n), strconv.Itoa(heap)}, nil, r)
	r.Close()
	trees := readTrees(b, out, n, true)
	x := watchExits(b, slices.Clone(trees))
	b.StartTimer()
	start := time.Now()
	cmd.Process.Kill()
	if afterEOF {
		waitEOF(b, eof)
		owner = time.Since(start)
	}
	for i := 1; i < len(trees); i += 2 { // "<grandchild> <child>": each child leads its group
		unix.PidfdSendSignal(trees[i], unix.SIGTERM, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	}
	last = slices.Max(x.wait(b, start))
	if !afterEOF {
		waitEOF(b, eof)
	}
	b.StopTimer()
	unix.Close(eof)
	cmd.Wait()
	return last, owner
}

// waitEOF waits until the read end of a pipe reports its end.
func waitEOF(b *testing.B, fd int) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 1000)
		switch {
		case n > 0:
			return
		case err != nil && err != unix.EINTR:
			b.Fatal(err)
		case time.Now().After(deadline):
			b.Fatal("the owner's files are still open")
		}
	}
}

func benchScopesDeath(b *testing.B, n, heap int) {
	var ds, owner []time.Duration
	b.StopTimer()
	for range b.N {
		d, eof := ownedDeath(b, n, heap, "", "")
		ds, owner = append(ds, d), append(owner, eof)
	}
	reportP50(b, ds)
	b.ReportMetric(float64(median(owner))/1e6, "owner-eof-p50-ms")
}

// ownedDeath is one death of benchScopesDeath, its owner's scopes of the given containment (the
// environment's when empty): the scopes' last exit, and when the owner's files closed. The owner's
// own end may come after the scopes' last exit (its supervisor acts at the start of its death).
// The owner is this binary's benchowner.Main, or, when at is not empty, the owner binary at.
func ownedDeath(b *testing.B, n, heap int, containment, at string) (last, owner time.Duration) {
	r, w, err := os.Pipe() // the lifeline
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var env []string
	if containment != "" {
		env = []string{scope.EnvContainment + "=" + containment}
	}
	cmd, out, eof := startBenchOwner(b, n, heap, env, r, at)
	r.Close()
	x := watchExits(b, append([]int{eof}, readTrees(b, out, n, true)...))
	b.StartTimer()
	start := time.Now()
	cmd.Process.Kill()
	exits := x.wait(b, start)
	b.StopTimer()
	cmd.Wait()
	return slices.Max(exits[1:]), exits[0]
}

// startBenchOwner starts the owner helper (or, when at is not empty, the owner binary at) with n
// scopes, heap MiB, env added to its environment and the lifeline as its stdin. It returns its
// stdout unread, and the read end of the pipe whose write end only the owner holds.
func startBenchOwner(b *testing.B, n, heap int, env []string, lifeline *os.File, at string) (cmd *exec.Cmd, out io.Reader, eof int) {
	args := []string{strconv.Itoa(n), b.TempDir() + "/l.json", strconv.Itoa(heap)}
	if at != "" {
		cmd = testproc.Command(b, at, args...)
		cmd.Env = os.Environ()
		return startOwner(b, cmd, env, lifeline)
	}
	return startOwnerHelper(b, "bench-owner", args, env, lifeline)
}

// startOwnerHelper is startBenchOwner for the named owner helper and its arguments, with env
// added to its environment.
func startOwnerHelper(b *testing.B, helper string, args, env []string, lifeline *os.File) (cmd *exec.Cmd, out io.Reader, eof int) {
	return startOwner(b, testproc.Helper(b, helper, args...), env, lifeline)
}

// startOwner is startOwnerHelper for an unstarted command.
func startOwner(b *testing.B, cmd *exec.Cmd, env []string, lifeline *os.File) (_ *exec.Cmd, out io.Reader, eof int) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin, cmd.Stderr, cmd.ExtraFiles = lifeline, os.Stderr, []*os.File{w}
	out, _ = cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// waitExits closes the descriptor: it is no longer r's.
	eof, err = unix.Dup(int(r.Fd()))
	r.Close()
	if err != nil {
		b.Fatal(err)
	}
	return cmd, out, eof
}

// benchOwnerDeath is the second floor: the owner helper with no scope (and so no supervisor)
// SIGKILLed, timed until its files are closed and its exit is seen. What its death costs is what
// every owned run pays before its supervisor can read the end of its pipe (the kernel closes a
// dying process's files only after tearing down its memory), and what the direct kill does not.
// An owner of N scopes dies slower than this one (it has a thread per child waiting for it, and
// more memory): the owned runs report their own owner's death as owner-eof-p50-ms.
func benchOwnerDeath(b *testing.B) {
	var ds []time.Duration
	b.StopTimer()
	for range b.N {
		cmd, out, eof := startBenchOwner(b, 0, 0, nil, nil, "")
		x := watchExits(b, append([]int{eof, pidfd(b, cmd.Process.Pid)}, readTrees(b, out, 0, true)...))
		b.StartTimer()
		start := time.Now()
		cmd.Process.Kill()
		ds = append(ds, slices.Max(x.wait(b, start)))
		b.StopTimer()
		cmd.Wait()
	}
	reportP50(b, ds)
}

// benchScopesDirect starts n trees itself, each in a process group (and, inCgroups, in a cgroup
// of its own, as scope.Prepare makes one), and times its own SIGTERM of the groups until every
// process has exited.
func benchScopesDirect(b *testing.B, n int, inCgroups bool) {
	var ds []time.Duration
	b.StopTimer()
	for range b.N {
		ds = append(ds, directKill(b, n, inCgroups))
	}
	reportP50(b, ds)
}

// directKill is one kill of benchScopesDirect: the trees' last exit.
func directKill(b *testing.B, n int, inCgroups bool) time.Duration {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer pr.Close()
	var cmds []*exec.Cmd
	var scopes []*scope.Scope
	for range n {
		cmd := exec.Command("sh", "-c", benchowner.Tree)
		cmd.Stdin, cmd.Stdout = r, pw
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if inCgroups {
			scopes = append(scopes, startInCgroup(b, cmd))
		} else if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	pw.Close()
	r.Close()
	x := watchExits(b, readTrees(b, pr, n, false))
	b.StartTimer()
	start := time.Now()
	for _, cmd := range cmds {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // our unreaped children: ids are stable
	}
	last := slices.Max(x.wait(b, start))
	b.StopTimer()
	for _, cmd := range cmds {
		cmd.Wait()
	}
	for _, s := range scopes {
		s.Close()
	}
	if len(scopes) > 0 {
		s := scopes[0]
		b.Cleanup(func() { removeOwnerDir(s) }) // at the end: later kills make their cgroups in it
	}
	return last
}

// startInCgroup starts cmd in a cgroup scope of its own.
func startInCgroup(b *testing.B, cmd *exec.Cmd) *scope.Scope {
	prep, err := scope.Prepare(cmd)
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		prep.Abandon()
		b.Fatal(err)
	}
	s, err := prep.Attach()
	if err != nil {
		b.Fatal(err)
	}
	if s.Kind() != scope.KindCgroup {
		b.Fatalf("%v is not a cgroup", s)
	}
	return s
}

// removeOwnerDir removes the owner directory of a closed cgroup scope this process made: with no
// supervisor here to remove it once its owner is gone, it would be left for a reap.
func removeOwnerDir(s *scope.Scope) {
	if _, where, _ := scope.Containment(); where != "" {
		os.Remove(filepath.Join(where, filepath.Base(filepath.Dir(s.Desc().Cgroup))))
	}
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
				fds = append(fds, pidfd(b, pid))
			}
			trees++
		default:
			b.Fatalf("tree said %q", sc.Text())
		}
	}
	return fds
}

func pidfd(b *testing.B, pid int) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		b.Fatalf("pidfd_open %d: %v", pid, err)
	}
	return fd
}

// exits waits for processes to exit: see watchExits.
type exits struct {
	ep  int
	fds []int
}

// watchExits adds pidfds (or a pipe's read end, whose end counts as an exit) to one epoll, each
// to be reported once. It is done before the timing starts: a poll(2) over all that remain at
// each wake-up would cost the waiter time in proportion to them, on the CPUs the processes it
// waits for need to exit, and would see the exits later the more there are.
func watchExits(b *testing.B, fds []int) *exits {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	for i, fd := range fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(i)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			b.Fatal(err)
		}
	}
	return &exits{ep: ep, fds: fds}
}

// wait waits until every watched process has exited, closes the descriptors, and returns when
// each exit was seen, from start, in the order given to watchExits.
func (x *exits) wait(b *testing.B, start time.Time) []time.Duration {
	ep, fds := x.ep, x.fds
	defer unix.Close(ep)
	deadline := time.Now().Add(30 * time.Second)
	exits := make([]time.Duration, len(fds))
	events := make([]unix.EpollEvent, 256)
	for left := len(fds); left > 0; {
		if time.Now().After(deadline) {
			b.Fatalf("%d processes still run", left)
		}
		n, err := unix.EpollWait(ep, events, 1000)
		if err != nil && err != unix.EINTR {
			b.Fatal(err)
		}
		now := time.Since(start)
		for _, e := range events[:max(n, 0)] {
			exits[e.Fd] = now
			left--
		}
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	return exits
}

func reportP50(b *testing.B, ds []time.Duration) {
	b.ReportMetric(float64(median(ds))/1e6, "p50-ms")
	b.ReportMetric(0, "ns/op")
}
