//go:build unix

package custody_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

// BenchmarkStart compares an owned start of /bin/true — its ledger row written into a ledger of
// 100 live rows, its group covered by a warm supervisor — with a plain exec.Cmd.Start of the same
// program with Setpgid. The two alternate within one loop, so that both see the same machine
// (on a shared virtual machine a start's cost drifts by a third within a minute), each going first
// every other time, and each is timed alone from before Start to its return; reaping each process, and for the owned one its
// release (the row dropped, the group uncovered, which keeps the ledger at 100 rows), are not
// timed. It reports the medians and owned/plain, their ratio.
//
// It runs once per containment the machine offers: containment=cgroup (the child born in a cgroup
// of its own, covered before it exists) where a writable cgroup2 subtree exists, and
// containment=process-group (forced with $CUSTODY_CONTAINMENT) everywhere.
//
// Two floors are timed in the same loop and reported beside: create-p50-ms, the making of one
// file in the ledger's directory (every ledger write makes its temporary file; the files are kept
// until the end, so that the floor deletes nothing that later creations would have to skip), and,
// on the cgroup path, cgroupfd-p50-ms, a plain start with Setpgid and UseCgroupFD into a cgroup
// of its own made just before (untimed) and removed after its exit: what the kernel charges for a
// birth into a new cgroup, with the removal of the one before it in flight, as it is for an owned
// start. owned/cgroupfd is the owned start's median over that floor's, and cgroupfd/plain that
// floor's over a plain start: the least owned/plain can be on this machine.
func BenchmarkStart(b *testing.B) {
	for _, c := range containments() {
		b.Run("containment="+c, func(b *testing.B) {
			b.Setenv(scope.EnvContainment, c)
			benchStart(b)
		})
	}
}

// containments lists the containments this process can have: process-group always, cgroup where
// it can.
func containments() []string {
	cs := []string{scope.KindGroup.Containment()}
	if k, _, _ := scope.Containment(); k == scope.KindCgroup {
		cs = append([]string{k.Containment()}, cs...)
	}
	return cs
}

func benchStart(b *testing.B) {
	dir := b.TempDir()
	led := ledger.Open(dir + "/spawn-ledger.json")
	fill(b, led, 100)
	sup := &supervise.Client{IdleGrace: -1}
	defer sup.Close()
	o := &custody.Owner{Ledger: led, Supervisor: sup}
	if err := sup.Start(); err != nil {
		b.Fatal(err)
	}
	cgdir := floorCgroup(b)
	ctx := context.Background()
	var plain, owned, create, cgroupfd, gated []time.Duration
	startPlain := func() {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		t := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(t))
		cmd.Wait()
	}
	startOwned := func() {
		t := time.Now()
		c, err := o.Start(ctx, exec.Command("/bin/true"), custody.StartOptions{Purpose: "serve"})
		if err != nil {
			b.Fatal(err)
		}
		owned = append(owned, time.Since(t))
		c.Wait()
		if err := c.Release(ctx); err != nil {
			b.Fatal(err)
		}
		custody.AwaitReserved(o)
	}
	for i := 0; b.Loop(); i++ {
		// Each goes first every other time: what the one before leaves the kernel to do (a
		// process's exit, a cgroup's removal) is then charged to both alike.
		if i%2 == 0 {
			startPlain()
			startOwned()
		} else {
			startOwned()
			startPlain()
		}
		if cgdir != "" {
			cgroupfd = append(cgroupfd, floorStartInCgroup(b, cgdir))
		} else if d, ok := floorStartGated(b); ok {
			gated = append(gated, d)
		}
		t := time.Now()
		f, err := os.CreateTemp(dir, "floor-*")
		if err != nil {
			b.Fatal(err)
		}
		create = append(create, time.Since(t))
		f.Close()
	}
	p, w := median(plain), median(owned)
	b.ReportMetric(float64(p)/1e6, "plain-p50-ms")
	b.ReportMetric(float64(w)/1e6, "owned-p50-ms")
	b.ReportMetric(float64(w)/float64(p), "owned/plain")
	b.ReportMetric(float64(mean(owned))/float64(mean(plain)), "mean-owned/plain")
	b.ReportMetric(float64(median(create))/1e6, "create-p50-ms")
	if cgdir != "" {
		c := median(cgroupfd)
		b.ReportMetric(float64(c)/1e6, "cgroupfd-p50-ms")
		b.ReportMetric(float64(w)/float64(c), "owned/cgroupfd")
		// The floor's own ratio: what owned/plain cannot go below, whatever custody does.
		b.ReportMetric(float64(c)/float64(p), "cgroupfd/plain")
	}
	if len(gated) > 0 {
		g := median(gated)
		b.ReportMetric(float64(g)/1e6, "gated-p50-ms")
		b.ReportMetric(float64(w)/float64(g), "owned/gated")
		// The floor's own ratio: what owned/plain cannot go below with a gate.
		b.ReportMetric(float64(g)/float64(p), "gated/plain")
	}
}

// floorStartGated times a plain start of /bin/true with Setpgid made to start as a gate, as the
// process-group path starts an owner's child: a copy of this binary with the gate's pipe among its
// files, whose exec the start waits for. The gate is closed unopened after the timing: the copy
// exits without running /bin/true. It is what the kernel charges for the gated start, without
// custody's work around it (the ledger's row, the cover line, the handle). false: this binary
// cannot gate.
func floorStartGated(b *testing.B) (time.Duration, bool) {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	closeGate, ok, err := custody.StartAsGate(cmd)
	if err != nil {
		b.Fatal(err)
	}
	if !ok {
		return 0, false
	}
	t := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t)
	closeGate()
	cmd.Wait()
	return d, true
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// fill writes n rows of live processes (cats that live until the benchmark ends).
func fill(b *testing.B, l *ledger.Ledger, n int) {
	self, _ := procid.Self()
	var rows []ledger.Row
	for range n {
		c := exec.Command("cat")
		c.StdinPipe()
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Process.Kill(); c.Wait() })
		inc, _ := procid.Read(c.Process.Pid)
		rows = append(rows, ledger.NewRow(inc, self))
	}
	if _, err := l.Update(context.Background(), nil, func([]ledger.Row) ([]ledger.Row, error) { return rows, nil }); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGate measures what the gate adds to an owned start on the process-group path: the time
// from before Start to the exit of /bin/true (seen by Wait), gated and ungated, alternating
// within one loop. The gate execs the owner's binary once more before the program, and the
// program runs only after the owner has covered its group; Start itself returns no later.
func BenchmarkGate(b *testing.B) {
	b.Setenv(scope.EnvContainment, scope.KindGroup.Containment())
	led := ledger.Open(b.TempDir() + "/spawn-ledger.json")
	sup := &supervise.Client{IdleGrace: -1}
	defer sup.Close()
	o := &custody.Owner{Ledger: led, Supervisor: sup}
	if err := sup.Start(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	run := func() time.Duration {
		t := time.Now()
		c, err := o.Start(ctx, exec.Command("/bin/true"), custody.StartOptions{Purpose: "serve"})
		if err != nil {
			b.Fatal(err)
		}
		c.Wait()
		d := time.Since(t)
		c.Release(ctx)
		return d
	}
	var gated, ungated []time.Duration
	for b.Loop() {
		gated = append(gated, run())
		custody.Ungated(func() { ungated = append(ungated, run()) })
	}
	g, u := median(gated), median(ungated)
	b.ReportMetric(float64(g)/1e6, "gated-p50-ms")
	b.ReportMetric(float64(u)/1e6, "ungated-p50-ms")
	b.ReportMetric(float64(g-u)/1e6, "gate-p50-ms")
}
