package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// BenchmarkBinary times the verbs users run as the programs they run: the custody binary, built
// from cmd/custody by the go command as custody ships it (CGO_ENABLED=0: a static binary, see
// docs/cli.md, "Building"), started once per figure and iteration, every figure of an
// iteration taken in turn so that a machine loaded by others weighs on all of them alike. Each is
// reported as the median wall time (-ms) and CPU time (-cpu-ms, user and system of the process
// and of the descendants it reaped, as wait4 reports them) over the iterations, and each marginal
// as the median of the per-iteration differences:
//
//   - version: `custody --version`, the floor of any verb (the runtime's start and exit);
//   - version-cgo: the same, of the binary a plain `go build` makes where a C compiler is found
//     (cgo on: libc loaded by the dynamic linker, the runtime's threads started through it);
//   - ps-1, ps-1000, ps-marginal: `custody ps --all --json` over 1 and 1,000 rows of distinct live
//     processes, written as `custody register` writes them (with pidfs ids);
//   - register-1, register-1000, register-marginal: `custody register` of a live process already
//     in a ledger of 1 and of 1,000 rows (its row replaced; the ledger keeps its size);
//   - stat-floor, pidfd-floor: the bare /proc/PID/stat loop and the bare pidfd loop over the same
//     1,000 PIDs on one thread of this process, the floors of a proof by start ticks and by pidfs
//     id; ps-vs-stat is ps-marginal over stat-floor, per iteration;
//   - run, run-vs-version: `custody run -- /bin/true` (owner, supervisor, ledger row, cgroup or
//     process group, the child) and its ratio to version, per iteration;
//   - run-floor, run-floor-vs-version, run-vs-floor: testdata/runfloor, a Go program that starts
//     the custody binary's --version as custody run starts its supervisor, then /bin/true, and
//     waits for both (the two processes custody run's design needs beside its own, and nothing
//     else: no ledger, no cgroup), its ratio to version (the least run-vs-version can be), and
//     run's ratio to it, per iteration;
//   - run-before-exec, run-after-exit: what `custody run -- date +%s%N` spends before the child's
//     exec and after its exit. date prints the real-time clock, which this process reads too; the
//     same date started directly, in the same iteration, gives the child's own share (its start
//     up to the print, its exit after it), which is subtracted.
func BenchmarkBinary(b *testing.B) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		b.Skipf("skipping: no go command to build cmd/custody: %v", err)
	}
	build := func(cgo string) string {
		bin := filepath.Join(b.TempDir(), "custody")
		cmd := exec.Command(gocmd, "build", "-o", bin, "../../cmd/custody")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("CGO_ENABLED=%s go build cmd/custody: %v\n%s", cgo, err, out)
		}
		return bin
	}
	bin := build("0")
	runFloor := filepath.Join(b.TempDir(), "runfloor")
	if out, err := exec.Command(gocmd, "build", "-o", runFloor, "./testdata/runfloor").CombinedOutput(); err != nil {
		b.Fatalf("go build testdata/runfloor: %v\n%s", err, out)
	}
	cgoBin := ""
	if _, err := exec.LookPath("gcc"); err == nil {
		cgoBin = build("1")
	}
	date, err := exec.LookPath("date")
	if err != nil {
		b.Skipf("skipping: no date command for the steps of custody run: %v", err)
	}
	big, small := liveLedger(b, 1000), liveLedger(b, 1)
	runLedger := filepath.Join(b.TempDir(), "spawn-ledger.json")
	rows, err := ledger.Open(big).Rows(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	one, err := ledger.Open(small).Rows(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	// start runs bin with args and returns its wall and CPU time, its output, and the real-time
	// clock read just before its start and just after its exit.
	start := func(args ...string) (wall, cpu time.Duration, out []byte, t0, t1 int64) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stderr = os.Stderr
		t0 = time.Now().UnixNano()
		s := time.Now()
		out, err := cmd.Output()
		wall = time.Since(s)
		t1 = time.Now().UnixNano()
		if err != nil {
			b.Fatalf("%q: %v", args, err)
		}
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), out, t0, t1
	}
	floor := func(probe func(pid int) error) (wall, cpu time.Duration) {
		return timeThread(b, func() {
			for _, r := range rows {
				if err := probe(r.PID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// printed returns the real-time clock date printed, in nanoseconds.
	printed := func(out []byte) int64 {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(out)), 10, 64)
		if err != nil {
			b.Fatalf("date printed %q: %v", out, err)
		}
		return n
	}
	statProbe := func(pid int) error { _, err := procid.Read(pid); return err }
	var wall, cpu = map[string][]time.Duration{}, map[string][]time.Duration{}
	ratios := map[string][]float64{}
	add := func(name string, w, c time.Duration) {
		wall[name], cpu[name] = append(wall[name], w), append(cpu[name], c)
	}
	for b.Loop() {
		vw, vc, _, _, _ := start(bin, "--version")
		add("version", vw, vc)
		if cgoBin != "" {
			cw, cc, _, _, _ := start(cgoBin, "--version")
			add("version-cgo", cw, cc)
		}
		p1w, p1c, _, _, _ := start(bin, "--ledger", small, "ps", "--all", "--json")
		pkw, pkc, out, _, _ := start(bin, "--ledger", big, "ps", "--all", "--json")
		if bytes.Count(out, []byte(`"state":"alive"`)) != 1000 {
			b.Fatalf("ps --json over 1,000 live rows: %d bytes, not 1,000 alive", len(out))
		}
		add("ps-1", p1w, p1c)
		add("ps-1000", pkw, pkc)
		add("ps-marginal", pkw-p1w, pkc-p1c)
		r1w, r1c, _, _, _ := start(bin, "--ledger", small, "register", "--pid", strconv.Itoa(one[0].PID), "--purpose", "serve")
		rkw, rkc, _, _, _ := start(bin, "--ledger", big, "register", "--pid", strconv.Itoa(rows[0].PID), "--purpose", "serve")
		add("register-1", r1w, r1c)
		add("register-1000", rkw, rkc)
		add("register-marginal", rkw-r1w, rkc-r1c)
		sw, sc := floor(statProbe)
		add("stat-floor", sw, sc)
		ratios["ps-vs-stat"] = append(ratios["ps-vs-stat"], float64(pkw-p1w)/float64(sw))
		if procid.PidfsError() == nil {
			pw, pc := floor(testproc.PidfdProbe)
			add("pidfd-floor", pw, pc)
		}
		rw, rc, _, _, _ := start(bin, "--ledger", runLedger, "run", "--", "/bin/true")
		add("run", rw, rc)
		ratios["run-vs-version"] = append(ratios["run-vs-version"], float64(rw)/float64(vw))
		fw, fc, _, _, _ := start(runFloor, bin, "/bin/true")
		add("run-floor", fw, fc)
		ratios["run-floor-vs-version"] = append(ratios["run-floor-vs-version"], float64(fw)/float64(vw))
		ratios["run-vs-floor"] = append(ratios["run-vs-floor"], float64(rw)/float64(fw))
		_, _, dout, d0, d1 := start(date, "+%s%N")
		_, _, rout, r0, r1 := start(bin, "--ledger", runLedger, "run", "--", date, "+%s%N")
		dp, rp := printed(dout), printed(rout)
		add("run-before-exec", time.Duration((rp-r0)-(dp-d0)), 0)
		add("run-after-exit", time.Duration((r1-rp)-(d1-dp)), 0)
	}
	b.ReportMetric(0, "ns/op")
	for name, ds := range wall {
		b.ReportMetric(median(ds), name+"-ms")
		if name != "run-before-exec" && name != "run-after-exit" {
			b.ReportMetric(median(cpu[name]), name+"-cpu-ms")
		}
	}
	for name, rs := range ratios {
		b.ReportMetric(medianOf(rs), name)
	}
}

// medianOf returns the median of xs.
func medianOf(xs []float64) float64 {
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = time.Duration(x * 1e6)
	}
	return median(ds)
}
