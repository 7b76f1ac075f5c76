package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/sdunit"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// envUserManager names the program that starts a real systemd user manager for a test user (up,
// exec CMD, down; run as root), which the CI script provides. Without it the tests of the systemd
// path skip.
const envUserManager = "CUSTODY_SYSTEMD_USER_MANAGER"

// sdUser is the test user the user manager runs for.
const sdUser = "sdtest"

func init() {
	// sd-delegated UNIT prints whether the user manager on the session bus says UNIT has
	// Delegate=yes, asked over D-Bus as custody asks.
	testproc.Register("sd-delegated", func(args []string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := sdunit.Dial(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer c.Close()
		d, err := c.Delegated(ctx, args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(d)
		return 0
	})
}

// userManager is a running systemd user manager for sdUser, stopped when the test ends.
type userManager struct {
	tool string
	uid  int
	dir  string // a directory of the user's holding a copy of the test binary and a ledger
	exe  string
}

func startUserManager(t testing.TB) *userManager {
	tool := os.Getenv(envUserManager)
	if tool == "" {
		testproc.Skip(t, "no systemd user manager to test against ($%s is not set)", envUserManager)
	}
	testproc.RequireRoot(t)
	m := &userManager{tool: tool}
	t.Cleanup(func() {
		if out, err := m.command(t, "down").CombinedOutput(); err != nil {
			t.Errorf("%s down: %v\n%s", tool, err, out)
		}
	})
	if out, err := m.command(t, "up").CombinedOutput(); err != nil {
		t.Fatalf("%s up: %v\n%s", tool, err, out)
	}
	u, err := user.Lookup(sdUser)
	if err != nil {
		t.Fatal(err)
	}
	m.uid, _ = strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	m.dir = testproc.TempDir(t)
	m.exe = filepath.Join(m.dir, "custody.test")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err == nil {
		err = os.WriteFile(m.exe, b, 0o755)
	}
	if err == nil {
		err = os.Mkdir(filepath.Join(m.dir, "state"), 0o700)
	}
	for _, p := range []string{filepath.Dir(m.dir), m.dir, filepath.Join(m.dir, "state"), m.exe} {
		if err == nil {
			err = os.Chown(p, m.uid, gid)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *userManager) command(t testing.TB, args ...string) *exec.Cmd {
	cmd := testproc.Command(t, m.tool, args...)
	cmd.Env = append(os.Environ(), "SDU_USER="+sdUser)
	return cmd
}

// asUser returns the command running the named helper of the test binary as the test user, in
// the user-owned client cgroup beside the user manager, with the user's session bus.
func (m *userManager) asUser(t testing.TB, helper string, args ...string) *exec.Cmd {
	return m.command(t, append([]string{"exec", "env", testproc.Env(helper), m.exe}, args...)...)
}

// delegated asks the user manager, over D-Bus as the test user, whether unit has Delegate=yes.
func (m *userManager) delegated(t testing.TB, unit string) string {
	out, err := m.asUser(t, "sd-delegated", unit).CombinedOutput()
	if err != nil {
		t.Errorf("ask the user manager for %s's Delegate: %v\n%s", unit, err, out)
	}
	return strings.TrimSpace(string(out))
}

// noUnits returns an error while the user manager has any custody unit loaded.
func (m *userManager) noUnits(t testing.TB) error {
	out, err := m.command(t, "exec", "systemctl", "--user", "list-units", "--all", "--no-legend", "custody-*").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		return fmt.Errorf("units left in the user manager: %s (%v)", out, err)
	}
	return nil
}

// sdTree is the shell tree of the systemd tests: the child, a descendant that left its session
// (setsid), and one that was double-forked (its parent exited, so it was re-parented).
const sdTree = `echo child $$; setsid sh -c 'echo escaped $$; exec sleep 1000' & ` +
	`(sh -c 'echo double $$; exec sleep 1000' &); exec cat`

// TestSystemdScope: a user whose own cgroup is a systemd unit's without delegation (the client
// cgroup, as a desktop terminal's scope) gets a transient scope with Delegate=yes holding custody
// run, and its child is born in a cgroup below it; Delegate reads back true over D-Bus; the
// setsid and double-forked descendants die with custody run's SIGKILL, and the unit ends with
// them, leaving nothing in the user manager.
func TestSystemdScope(t *testing.T) {
	m := startUserManager(t)
	led := filepath.Join(m.dir, "state", "l.json")
	p := testproc.Start(t, m.asUser(t, "custody", "--ledger", led, "run", "--", "sh", "-c", sdTree))
	child := p.Expect("child ", 20*time.Second)[0]
	tree := descendants(t, p)
	cg, err := os.ReadFile("/proc/" + child + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimSpace(string(cg[strings.LastIndex(string(cg), "0::")+3:]))
	unit := filepath.Base(filepath.Dir(filepath.Dir(rel)))
	if !strings.HasPrefix(unit, "custody-") || !strings.HasSuffix(unit, ".scope") || !strings.HasSuffix(rel, "/s1") {
		t.Fatalf("custody run's child is in cgroup %s; want <unit custody-*.scope>/custody-<owner>/s1", rel)
	}
	if got := m.delegated(t, unit); got != "true" {
		t.Errorf("the user manager says %s's Delegate is %q; want true", unit, got)
	}
	awaitRow(t, led, child)
	if m.noUnits(t) == nil {
		t.Errorf("the user manager lists no custody unit while custody run's child runs")
	}
	if b, err := os.ReadFile(led); err != nil || !strings.Contains(string(b), `"cgroup_via":"systemd-scope"`) {
		t.Errorf("the child's row: %s (%v); want cgroup_via systemd-scope", b, err)
	}
	unitDir := filepath.Join(cgroup2Of(t), filepath.Dir(filepath.Dir(rel)))
	killOwner(t, child)
	p.Wait()
	testproc.WaitFor(t, 15*time.Second, func() error {
		for _, id := range tree {
			if id.Verify() == nil {
				return fmt.Errorf("descendant %v still runs after custody run's SIGKILL", id)
			}
		}
		if _, err := os.Stat(unitDir); err == nil {
			return fmt.Errorf("the unit's cgroup %s is still there", unitDir)
		}
		return m.noUnits(t)
	})
}

// killOwner SIGKILLs the owner of child, custody run (its parent), through a pidfd proven to
// name the child's parent: the tool that started custody run as the test user stays its caller.
func killOwner(t *testing.T, child string) {
	t.Helper()
	c, err := procid.Read(atoi(child))
	if err != nil {
		t.Fatal(err)
	}
	owner, err := procid.Read(c.PPID)
	if err != nil {
		t.Fatal(err)
	}
	if err := killID(owner.ID); err != nil {
		t.Fatalf("SIGKILL custody run %v: %v", owner.ID, err)
	}
}

// descendants reads the "escaped PID" and "double PID" lines of sdTree, in either order, and
// returns the two descendants, killed when the test ends if still alive.
func descendants(t *testing.T, p *testproc.Proc) []procid.ID {
	t.Helper()
	var tree []procid.ID
	for len(tree) < 2 {
		line := p.Line(10 * time.Second)
		name, pid, _ := strings.Cut(line, " ")
		if name != "escaped" && name != "double" {
			t.Fatalf("line %q; want escaped PID or double PID", line)
		}
		inc, err := procid.Read(atoi(pid))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { killID(inc.ID) }) // a failed test must not leave it running
		tree = append(tree, inc.ID)
	}
	return tree
}

// moveToRootCgroup moves pid, a process of the test user in the client cgroup, into a sibling
// of that cgroup that root made: the user may write neither it nor its cgroup.procs, as in an
// SSH session's session-N.scope.
func moveToRootCgroup(t testing.TB, pid int) {
	t.Helper()
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	client := strings.TrimSpace(string(cg[strings.LastIndex(string(cg), "0::")+3:]))
	session := filepath.Join(cgroup2Of(t), filepath.Dir(client), "session-custodytest.scope")
	if err := os.Mkdir(session, 0o755); err == nil {
		t.Cleanup(func() { removeCgroups(session) })
	} else if !os.IsExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(session, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}
}

// cgroup2Of returns where the cgroup2 hierarchy that holds this process is mounted.
func cgroup2Of(t testing.TB) string {
	t.Helper()
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var fs unix.Statfs_t
		if unix.Statfs(dir, &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
			return dir
		}
	}
	t.Fatal("no cgroup2 mount")
	return ""
}

// TestSystemdService: a user whose own cgroup is root's (as an SSH session's session-N.scope),
// which the user manager cannot move a process out of, gets its child started by custody agent
// in a transient service with Delegate=yes, born in a cgroup below it; Delegate reads back true
// over D-Bus; the setsid and double-forked descendants die with custody run's SIGKILL, and the
// service ends with them, leaving nothing in the user manager.
func TestSystemdService(t *testing.T) {
	m := startUserManager(t)
	led := filepath.Join(m.dir, "state", "l.json")
	p := testproc.Start(t, m.command(t, "exec", "sh", "-c", `echo waiting $$; read x; exec "$@"`, "sh",
		"env", testproc.Env("custody"), m.exe, "--ledger", led, "run", "--", "sh", "-c", sdTree))
	owner, err := procid.Read(atoi(p.Expect("waiting ", 20*time.Second)[0]))
	if err != nil {
		t.Fatal(err)
	}
	mount := cgroup2Of(t)
	moveToRootCgroup(t, owner.PID)
	if err := owner.ID.Verify(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(p.Stdin(), "go")
	child := p.Expect("child ", 20*time.Second)[0]
	tree := descendants(t, p)
	cg, err := os.ReadFile("/proc/" + child + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimSpace(string(cg[strings.LastIndex(string(cg), "0::")+3:]))
	unit := filepath.Base(filepath.Dir(filepath.Dir(rel)))
	if !strings.HasPrefix(unit, "custody-agent-") || !strings.HasSuffix(unit, ".service") || !strings.HasSuffix(rel, "/s1") {
		t.Fatalf("custody run's child is in cgroup %s; want <unit custody-agent-*.service>/custody-<agent>/s1", rel)
	}
	if got := m.delegated(t, unit); got != "true" {
		t.Errorf("the user manager says %s's Delegate is %q; want true", unit, got)
	}
	awaitRow(t, led, child)
	if m.noUnits(t) == nil {
		t.Errorf("the user manager lists no custody unit while custody run's child runs")
	}
	if b, err := os.ReadFile(led); err != nil || !strings.Contains(string(b), `"cgroup_via":"systemd-service"`) {
		t.Errorf("the child's row: %s (%v); want cgroup_via systemd-service", b, err)
	}
	unitDir := filepath.Join(mount, filepath.Dir(filepath.Dir(rel)))
	if err := killID(owner.ID); err != nil {
		t.Fatalf("SIGKILL custody run %v: %v", owner.ID, err)
	}
	p.Wait()
	testproc.WaitFor(t, 15*time.Second, func() error {
		for _, id := range tree {
			if id.Verify() == nil {
				return fmt.Errorf("descendant %v still runs after custody run's SIGKILL", id)
			}
		}
		if _, err := os.Stat(unitDir); err == nil {
			return fmt.Errorf("the service's cgroup %s is still there", unitDir)
		}
		if left, _ := filepath.Glob(fmt.Sprintf("/run/user/%d/custody-agent-*", m.uid)); len(left) > 0 {
			return fmt.Errorf("custody run's socket directory is left in the user's runtime directory: %s", left)
		}
		return m.noUnits(t)
	})
}

// ownerDir matches the directory of one owner's cgroup scopes.
var ownerDir = regexp.MustCompile(`^custody-[0-9]+-[0-9]+-[0-9]+$`)

// TestSystemdScopeNested: custody run inside a child of custody run on the scope path is a
// nested owner: its child's cgroup is made inside the outer child's, within the one delegated
// unit, without a bus of its own to ask (its environment has neither bus variable).
func TestSystemdScopeNested(t *testing.T) {
	m := startUserManager(t)
	led := filepath.Join(m.dir, "state", "l.json")
	out, err := m.asUser(t, "custody", "--ledger", led, "run", "--",
		"env", "-u", "DBUS_SESSION_BUS_ADDRESS", "-u", "XDG_RUNTIME_DIR", m.exe, "--ledger", led, "run", "--",
		"sh", "-c", "sed -n 's/^0:://p' /proc/self/cgroup").CombinedOutput()
	var units, owners int
	for _, part := range strings.Split(strings.TrimSpace(string(out)), "/") {
		switch {
		case ownerDir.MatchString(part):
			owners++
		case strings.HasPrefix(part, "custody-") && strings.HasSuffix(part, ".scope"):
			units++
		}
	}
	if err != nil || owners != 2 || units != 1 {
		t.Fatalf("nested custody run's child: %q (%v); want <custody-*.scope>/custody-<outer>/s1/custody-<inner>/s1", out, err)
	}
}

// TestSystemdDoctor: custody doctor says which systemd path a start would take, and why, and
// starts no unit: a scope in the client cgroup (an undelegated unit's), a service in a
// root-owned one.
func TestSystemdDoctor(t *testing.T) {
	m := startUserManager(t)
	for _, tc := range []struct {
		name, want string
		move       bool
	}{
		{"client cgroup", "systemd-scope: ", false},
		{"root-owned cgroup", "systemd-service: ", true},
	} {
		p := testproc.Start(t, m.command(t, "exec", "sh", "-c", `echo waiting $$; read x; exec "$@"`, "sh",
			"env", testproc.Env("custody"), m.exe, "--ledger", filepath.Join(m.dir, "state", "l.json"), "doctor"))
		pid := atoi(p.Expect("waiting ", 20*time.Second)[0])
		if tc.move {
			moveToRootCgroup(t, pid)
		}
		fmt.Fprintln(p.Stdin(), "go")
		// The text report's line: "systemd   ok  <detail>".
		fields := p.Expect("systemd ", 20*time.Second)
		p.Wait()
		detail := strings.Join(fields[min(1, len(fields)):], " ") + " "
		if !strings.HasPrefix(detail, tc.want) {
			t.Errorf("%s: doctor's systemd line is %q; want it to begin %q", tc.name, detail, tc.want)
		}
	}
	if err := m.noUnits(t); err != nil {
		t.Errorf("doctor started a unit: %v", err)
	}
}
