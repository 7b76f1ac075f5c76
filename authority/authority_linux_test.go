package authority_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

func init() { testproc.Register("signal-as-nobody", helperSignalAsNobody) }

func TestPidfdProbe(t *testing.T) {
	if err := authority.ProbePidfd(); err != nil {
		testproc.Skip(t, "pidfd unavailable: %v", err)
	}
	if err := authority.PidfdError(); err != nil {
		t.Fatalf("PidfdError() = %v after a successful probe", err)
	}
}

// forceChecked makes the package behave as on a kernel without pidfd.
func forceChecked(t *testing.T) {
	replace(t, authority.PidfdErr, func() error { return errors.New("pidfd disabled by the test") })
}

func TestCheckedMode(t *testing.T) {
	forceChecked(t)
	t.Run("kill and wait", func(t *testing.T) { acquireKillWait(t, false) })
	t.Run("term", signalTerm)
	t.Run("wrong start", wrongStartRefusesAndSpares)
	t.Run("from os", fromOS)
}

func TestAcquireOtherBoot(t *testing.T) {
	c := startHelper(t, "sleep", nil)
	rec := exactRecord(c.incarnation())
	rec.BootID = ptr("00000000-0000-0000-0000-000000000000")
	p, err := authority.Acquire(rec)
	if err == nil {
		p.Close()
		t.Fatal("Acquire of a record from another boot succeeded")
	}
	t.Logf("Acquire: %v", err)
	mustIs(t, err, authority.ErrNoAuthority)
	mustNotIs(t, err, procid.ErrGone)
	c.assertAlive()
	c.stop()
}

// TestSignalPermissionDenied signals a root-owned process from uid 65534: pidfd_open and the
// proof succeed across users, the signal is refused, and the refusal is detectable.
func TestSignalPermissionDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		testproc.Skip(t, "needs root to run a helper as uid 65534 (euid %d)", os.Geteuid())
	}
	target := startHelper(t, "sleep", setpgid)
	inc := target.incarnation()
	h := startHelper(t, "signal-as-nobody", nil, strconv.Itoa(inc.PID), strconv.FormatUint(inc.Start, 10), inc.BootID)
	for _, what := range []string{"process", "group"} {
		got := h.expect(what + " ")
		t.Logf("%s signal as uid 65534: %s", what, got)
		if !strings.HasPrefix(got, "permission ") {
			t.Errorf("%s signal as uid 65534: %s; want a permission error", what, got)
		}
	}
	h.waitExit()
	if h.err != nil {
		t.Errorf("helper: %v", h.err)
	}
	target.assertAlive()
	target.stop()
}

// helperSignalAsNobody drops to uid/gid 65534, then tries to signal the process and the group
// that args name, and reports how each failed.
func helperSignalAsNobody(args []string) int {
	pid, _ := strconv.Atoi(args[0])
	start, _ := strconv.ParseUint(args[1], 10, 64)
	boot := args[2]
	// Go applies set*id to every thread of the process (Go 1.16+).
	if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(65534), syscall.Setuid(65534)); err != nil {
		fmt.Fprintln(os.Stderr, "drop privileges:", err)
		return 1
	}
	report := func(what string, err error) {
		if errors.Is(err, os.ErrPermission) && !errors.Is(err, authority.ErrNoAuthority) && !errors.Is(err, procid.ErrGone) {
			fmt.Printf("%s permission %v\n", what, err)
		} else {
			fmt.Printf("%s unexpected %v\n", what, err)
		}
	}
	p, err := authority.Acquire(procid.Record{PID: pid, StartTicks: &start, BootID: &boot})
	if err != nil {
		fmt.Printf("process acquire failed: %v\n", err)
	} else {
		report("process", p.Signal(syscall.SIGTERM))
		p.Close()
	}
	report("group", authority.Group{PGID: pid, Leader: procid.ID{PID: pid, Start: start}}.Signal(syscall.SIGTERM))
	return 0
}

const pidnsEnv = "CUSTODY_AUTHORITY_IN_PIDNS"

// TestPIDReuseWitness makes a stranger receive a dead process's PID, deterministically, in a PID
// namespace of its own, and shows that neither the process record nor the group record gives
// authority over the stranger.
func TestPIDReuseWitness(t *testing.T) {
	if os.Getenv(pidnsEnv) == "1" {
		inPIDNamespace(t)
		return
	}
	if os.Geteuid() != 0 {
		testproc.Skip(t, "needs root for a PID namespace and ns_last_pid (euid %d)", os.Geteuid())
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := waitCtx(t, testproc.Timeout(t))
	cmd := exec.CommandContext(ctx, exe, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), pidnsEnv+"=1", "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID,
		// Go makes the new mount namespace private, so the inner proc mount stays inside it.
		Unshareflags: syscall.CLONE_NEWNS,
		Pdeathsig:    syscall.SIGKILL,
	}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("inside a new PID namespace:\n%s", out)
	var se *os.SyscallError
	if errors.As(err, &se) && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
		testproc.Skip(t, "cannot create a PID namespace: %v", err)
	}
	if err != nil {
		t.Fatalf("inner test: %v", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) || bytes.Contains(out, []byte("--- SKIP")) {
		t.Fatal("the inner test did not pass every case")
	}
}

func inPIDNamespace(t *testing.T) {
	if os.Getpid() != 1 {
		t.Fatalf("pid %d, want 1 in a new PID namespace", os.Getpid())
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		t.Fatalf("mount proc: %v", err)
	}
	t.Run("process", pidReuseProcess)
	t.Run("group", pidReuseGroup)
}

func pidReuseProcess(t *testing.T) {
	a := startHelper(t, "sleep", nil)
	incA := a.incarnation()
	recA := exactRecord(incA)
	p, err := authority.Acquire(recA)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	a.waitExit() // reaped: A's PID is free

	b := startStranger(t, incA, nil)
	_, err = authority.Acquire(recA)
	t.Logf("Acquire(A's record) with B at A's pid: %v", err)
	mustIs(t, err, authority.ErrNoAuthority, procid.ErrReused)
	mustNotIs(t, err, procid.ErrGone)
	b.assertAlive()
	b.stop()
}

func pidReuseGroup(t *testing.T) {
	a := startHelper(t, "sleep", setpgid)
	incA := a.incarnation()
	m := startHelper(t, "sleep", joinGroup(incA.PID))
	m.incarnation()
	g := authority.Group{PGID: incA.PID, Leader: incA.ID}
	mustHold(t, g, true)
	if err := g.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(waitCtx(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	a.waitExit()
	m.waitExit()
	mustHold(t, g, false)

	b := startStranger(t, incA, setpgid) // B leads a new group whose id is A's
	if pgid := b.incarnation().PGID; pgid != g.PGID {
		t.Fatalf("stranger's pgid = %d, want %d", pgid, g.PGID)
	}
	mustHold(t, g, false)
	err := g.Signal(syscall.SIGTERM)
	t.Logf("Signal(A's group) with B leading a group of the same id: %v", err)
	mustIs(t, err, authority.ErrNoAuthority, procid.ErrReused)
	b.assertAlive()
	b.stop()
}

// startStranger starts a helper that receives a's PID, in a later clock tick than a started in,
// by writing the PID before it to ns_last_pid (the namespace's last allocated PID).
func startStranger(t *testing.T, a procid.Incarnation, configure func(*exec.Cmd)) *child {
	t.Helper()
	c, err := testproc.ReusePIDWith(a.PID, a.Start, func() (*child, int, error) {
		c := startHelper(t, "sleep", configure)
		return c, c.pid(), nil
	}, (*child).stop)
	if err != nil {
		t.Fatalf("stranger for %v: %v", a.ID, err)
	}
	if inc := c.incarnation(); inc.Start <= a.Start {
		t.Fatalf("stranger %v did not start after %v", inc.ID, a.ID)
	}
	return c
}

func init() { testproc.Register("empty-blind", helperEmptyBlind) }

// TestGroupEmptyBlind: under a /proc mounted with hidepid=2, an ordinary user cannot scan for the
// live members of its own group: Empty says it cannot tell, and why, and a Wait that times out
// gives that reason, instead of a bare "not empty" and a stop timed out without one.
func TestGroupEmptyBlind(t *testing.T) {
	testproc.RequireRoot(t)
	cmd := testproc.Helper(t, "empty-blind")
	cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS // a private proc mount
	h := testproc.Start(t, cmd)
	for _, what := range []string{"empty", "wait"} {
		f := h.Expect(what+" ", 30*time.Second)
		if len(f) < 1 || f[0] != "blind" {
			t.Errorf("%s under hidepid=2 as nobody: %v; want an error wrapping procid.ErrScanBlind", what, f)
		}
	}
}

// helperEmptyBlind mounts a proc with hidepid=2, becomes nobody, starts a process in a group of
// its own, and prints "empty <blind|other> <err>" and "wait <blind|other> <err>" for that group.
func helperEmptyBlind([]string) int {
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "hidepid=2"); err != nil {
		fmt.Println("skip cannot mount proc with hidepid=2:", err)
		return 0
	}
	if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(65534), syscall.Setuid(65534)); err != nil {
		fmt.Println("skip cannot become nobody:", err)
		return 0
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	g := authority.Group{PGID: cmd.Process.Pid}
	report := func(what string, err error) {
		kind := "other"
		if errors.Is(err, procid.ErrScanBlind) {
			kind = "blind"
		}
		fmt.Println(what, kind, err)
	}
	_, err := g.Empty()
	report("empty", err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	report("wait", g.Wait(ctx))
	return 0
}
