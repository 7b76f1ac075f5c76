package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// containmentOf runs custody doctor --json through cmd's settings and returns its containment
// line.
func containmentOf(t *testing.T, run func(args ...string) result) (ok bool, detail string) {
	t.Helper()
	r := run("doctor", "--json")
	var rep struct {
		Features []struct {
			Name   string
			OK     bool
			Detail string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v (%+v)", err, r)
	}
	for _, f := range rep.Features {
		if f.Name == "containment" {
			return f.OK, f.Detail
		}
	}
	t.Fatalf("doctor --json has no containment line: %s", r.stdout)
	return false, ""
}

// An ordinary user whose cgroup is not writable gets process groups, and doctor says so and why;
// in a cgroup delegated to them (as systemd's user manager does), the same user gets cgroups, and
// custody run's child is born in one below it.
func TestContainmentAsUser(t *testing.T) {
	testproc.RequireRoot(t)
	kind, where, why := scope.Containment()
	if kind != scope.KindCgroup {
		testproc.Skip(t, "no cgroup containment even for root: %v", why)
	}
	mount := cgroupMount(t, where)
	asUser := func(t *testing.T, cgfd int) func(args ...string) result {
		dir := t.TempDir()
		return func(args ...string) result {
			cmd := testproc.Helper(t, "custody", append([]string{"--ledger", filepath.Join(dir, "state", "l.json")}, args...)...)
			asNobody(t, cmd, dir)
			if cgfd >= 0 {
				cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
			}
			return runCmd(t, cmd)
		}
	}
	t.Run("undelegated", func(t *testing.T) {
		ok, detail := containmentOf(t, asUser(t, -1))
		if ok || !strings.HasPrefix(detail, "process-group: ") || !strings.Contains(detail, "not writable") {
			t.Fatalf("doctor as an ordinary user outside a delegated cgroup: ok=%v %q", ok, detail)
		}
	})
	t.Run("delegated", func(t *testing.T) {
		deleg := filepath.Join(mount, fmt.Sprintf("custody-test-delegated-%d", os.Getpid()))
		if err := os.Mkdir(deleg, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeCgroups(deleg) })
		for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
			if err := os.Chown(filepath.Join(deleg, f), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		fd, err := unix.Open(deleg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		run := asUser(t, fd)
		ok, detail := containmentOf(t, run)
		if !ok || !strings.Contains(detail, deleg) {
			t.Fatalf("doctor as a user in a delegated cgroup: ok=%v %q; want a cgroup in %s", ok, detail, deleg)
		}
		r := run("run", "--", "cat", "/proc/self/cgroup")
		rel := "/" + filepath.Base(deleg) + "/custody-"
		if r.code != 0 || !strings.Contains(r.stdout, "0::"+rel) || !strings.Contains(r.stdout, "/s1\n") {
			t.Fatalf("custody run as the user: %+v; want the child in a cgroup %s<owner>/s1", r, rel)
		}
		escapeDies(t, fd)
	})
}

// escapeDies: as the ordinary user in the delegated cgroup, a descendant of custody run's child
// that left its session (setsid) dies when custody run is SIGKILLed (the user's supervisor kills
// the child's cgroup, which the descendant cannot leave), and when the user stops the child.
func escapeDies(t *testing.T, cgfd int) {
	for _, how := range []string{"owner SIGKILLed", "custody stop"} {
		dir := t.TempDir()
		led := filepath.Join(dir, "state", "l.json")
		cmd := testproc.Helper(t, "custody", "--ledger", led, "run", "--",
			"sh", "-c", "echo child $$; setsid sh -c 'echo escaped $$; exec sleep 1000' & exec cat")
		asNobody(t, cmd, dir)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
		p := testproc.Start(t, cmd)
		child := p.Expect("child ", 10*time.Second)[0]
		esc, err := procid.Read(atoi(p.Expect("escaped ", 10*time.Second)[0]))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { killID(esc.ID) }) // a failed test must not leave the escapee running
		if inc, err := procid.Read(esc.PID); err != nil || inc.PGID != esc.PID {
			t.Fatalf("descendant %v: %+v %v; want it leading a session and group of its own", esc.ID, inc, err)
		}
		if how == "custody stop" {
			// The child runs, and prints, before custody run has recorded it: a stop before the
			// row is written would find no authority.
			awaitRow(t, led, child)
			stop := testproc.Helper(t, "custody", "--ledger", led, "stop", "--grace", "1s", child)
			asNobody(t, stop, t.TempDir()) // its own copy of the binary: the first one is running
			if r := runCmd(t, stop); r.code != 0 || !strings.Contains(r.stdout, "exited") {
				t.Errorf("custody stop %s as uid 65534: %+v", child, r)
				p.Process.Kill() // custody run would wait for its child for ever
			}
		} else {
			p.Process.Signal(unix.SIGKILL)
		}
		p.Wait()
		testproc.WaitFor(t, 15*time.Second, func() error {
			if esc.ID.Verify() == nil {
				return fmt.Errorf("%s: the setsid descendant %v of uid 65534's child still runs", how, esc.ID)
			}
			return nil
		})
	}
}

// awaitRow waits until the ledger at path holds a row for pid. It reads the file itself: the
// ledger belongs to uid 65534, which custody as root would rightly not trust.
func awaitRow(t *testing.T, path, pid string) {
	t.Helper()
	testproc.WaitFor(t, 10*time.Second, func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var rows []struct {
			PID json.Number `json:"pid"`
		}
		if err := json.Unmarshal(b, &rows); err != nil {
			return err
		}
		for _, r := range rows {
			if r.PID.String() == pid {
				return nil
			}
		}
		return fmt.Errorf("no row for pid %s in %s", pid, path)
	})
}

// cgroupMount returns the cgroup2 mount above where (which is <mount>/custody for root).
func cgroupMount(t *testing.T, where string) string {
	t.Helper()
	for d := where; d != "/"; d = filepath.Dir(d) {
		var fs unix.Statfs_t
		if unix.Statfs(filepath.Dir(d), &fs) != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
			return d
		}
	}
	t.Fatalf("no cgroup2 mount above %s", where)
	return ""
}

// removeCgroups removes a cgroup tree the test made, deepest first.
func removeCgroups(root string) {
	var dirs []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		unix.Rmdir(dirs[i])
	}
}

// custody run inside custody run is a nested owner: ps shows the inner child under the inner
// owner, indented, with each row's containment. Started through a shell that the outer run owns
// (shell=true), the inner owner is not a row: in cgroups the inner child sits under the shell's
// row, whose cgroup holds its own.
func TestPsShowsNesting(t *testing.T) {
	for _, shell := range []bool{false, true} {
		t.Run(fmt.Sprintf("shell=%v", shell), func(t *testing.T) { psShowsNesting(t, shell) })
	}
}

func psShowsNesting(t *testing.T, shell bool) {
	kind, _, _ := scope.Containment()
	if shell && kind != scope.KindCgroup {
		testproc.Skip(t, "no cgroup containment: with process groups a row whose spawner is not listed is a root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	led := ledgerPath(t)
	g := []string{"--ledger", led}
	// The inner custody run records its child's row once the child has started: ps, that child,
	// may read the ledger first on a loaded machine, and so reads until it sees its own row.
	ps := strings.Join(append(append([]string{exe}, g...), "ps", "--all"), " ")
	inner := []string{"sh", "-c", `for i in $(seq 200); do out=$(` + ps + `) || exit 1; ` +
		`[ "$(printf '%s\n' "$out" | wc -l)" -ge 3 ] && break; sleep 0.05; done; printf '%s\n' "$out"`}
	middle := append(append(append([]string{exe}, g...), "run", "--"), inner...)
	if shell { // not exec: the shell stays, the row the outer run writes
		middle = append([]string{"sh", "-c", `"$@"; exit $?`, "sh"}, middle...)
	}
	r := runCLI(t, append(append(g, "run", "--"), middle...)...)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 {
		t.Fatalf("nested ps: %+v", r)
	}
	header, outer, nested := strings.Fields(lines[0]), strings.Fields(lines[1]), strings.Fields(lines[2])
	spawner, contained := slices.Index(header, "SPAWNER"), slices.Index(header, "CONTAINMENT")
	if strings.HasPrefix(lines[1], " ") || !strings.HasPrefix(lines[2], "  ") || len(nested) < len(header) ||
		spawner < 0 || contained < 0 || (nested[spawner] == outer[0]) == shell ||
		outer[contained] != kind.Containment() || nested[contained] != kind.Containment() {
		t.Fatalf("nested ps: want the inner row under the outer one, both %s:\n%s", kind.Containment(), r.stdout)
	}
}

// TestRunLeavesNoCgroup: custody run removes its child's cgroup and its own directory of scopes
// before it exits: no empty directory is left for a reap.
func TestRunLeavesNoCgroup(t *testing.T) {
	kind, where, why := scope.Containment()
	if kind != scope.KindCgroup {
		testproc.Skip(t, "no cgroup containment: %v", why)
	}
	mount := cgroupMount(t, where)
	p := startRun(t, "sh", "-c", "echo cg $(sed -n 's/^0:://p' /proc/self/cgroup)")
	rel := p.Expect("cg ", 10*time.Second)
	if len(rel) != 1 {
		t.Fatalf("the child's cgroup: %q", rel)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("custody run: %v", err)
	}
	child := filepath.Join(mount, rel[0])
	for _, dir := range []string{child, filepath.Dir(child)} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left after custody run exited (%v)", dir, err)
		}
	}
}
