package authority_test

import (
	"bytes"
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
	for _, what := range []string{"process"} {
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

// TestExitStatusDuringReap: reading the exit status while the parent reaps never fails. The
// kernel answers PIDFD_GET_INFO with ESRCH in the instant when the task is still found but its
// pid is already detached; that read is "not yet". Each round signals a helper, which its
// reaper goroutine reaps at once, and reads the status in a tight loop across that instant
// until it appears.
func TestExitStatusDuringReap(t *testing.T) {
	if err := authority.PidfdError(); err != nil {
		testproc.Skip(t, "pidfd unavailable: %v", err)
	}
	for i := range 100 {
		c := startHelper(t, "sleep", nil)
		p, err := authority.Acquire(exactRecord(c.incarnation()))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var st authority.ExitStatus
		for ok := false; !ok; {
			if st, ok, err = authority.ReadExit(p); errors.Is(err, authority.ErrNoExitStatus) {
				p.Close()
				c.waitExit()
				testproc.Skip(t, "this kernel has no PIDFD_GET_INFO (Linux 6.13+): %v", err)
			} else if err != nil {
				t.Fatalf("round %d: a read during the reap: %v", i, err)
			}
			select {
			case <-c.done:
				if !ok { // reaped: the status is there now, or this kernel keeps none
					if st, ok, err = authority.ReadExit(p); err != nil || !ok {
						p.Close()
						testproc.Skip(t, "this kernel keeps no exit status for a pidfd (Linux 6.15+): %v", err)
					}
				}
			default:
			}
		}
		p.Close()
		c.waitExit() // its reaper is about to return
		if st.Signal != syscall.SIGTERM {
			t.Fatalf("round %d: %+v, want killed by SIGTERM", i, st)
		}
	}
}
