//go:build unix

package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/cli"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

const nobody = 65534

func init() {
	// custody-as-nobody is the command line run by uid 65534. It drops root's ids itself: the test
	// binary lies in a directory only root may enter, so it cannot be started as another user.
	// catch-term reports each SIGTERM on stdout and lives on.
	testproc.Register("catch-term", func([]string) int {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		go func() {
			for range c {
				fmt.Println("term")
			}
		}()
		bufio.NewScanner(os.Stdin).Scan()
		return 0
	})
	testproc.Register("custody-as-nobody", func([]string) int {
		if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(nobody), syscall.Setuid(nobody)); err != nil {
			fmt.Fprintln(os.Stderr, "cannot drop privileges:", err)
			return 99
		}
		return cli.Main()
	})
}

// hazard makes a working ledger untrusted (or unreadable) and returns what the error must name.
type hazard struct {
	name  string
	plant func(t *testing.T, led string) (named string)
}

var hazards = []hazard{
	{"directory writable by others", func(t *testing.T, led string) string {
		must(t, os.Chmod(filepath.Dir(led), 0o777))
		return filepath.Dir(led)
	}},
	{"directory of another user", func(t *testing.T, led string) string {
		must(t, os.Chown(filepath.Dir(led), nobody, nobody))
		return filepath.Dir(led)
	}},
	{"ledger of another user", func(t *testing.T, led string) string {
		must(t, os.Chown(led, nobody, nobody))
		return led
	}},
	{"ledger is a FIFO", func(t *testing.T, led string) string {
		must(t, os.Rename(led, led+".saved"))
		must(t, syscall.Mkfifo(led, 0o600))
		return led
	}},
	{"ledger above the size limit", func(t *testing.T, led string) string {
		must(t, os.Truncate(led, 3<<30)) // sparse: no disk used
		return led
	}},
}

// TestVerbsRefuseUntrusted: with the ledger untrusted, every verb fails in one line naming the
// refused path, promptly (a FIFO blocks none), and signals, starts and changes nothing, though the
// ledger holds a row that stop and reap would otherwise act on.
func TestVerbsRefuseUntrusted(t *testing.T) {
	testproc.RequireRoot(t) // chown to another uid
	for _, hz := range hazards {
		t.Run(hz.name, func(t *testing.T) {
			led := ledgerPath(t)
			victim := reaped(t, exec.Command("cat"))
			pid := strconv.Itoa(victim.Process.Pid)
			s := registerVia(t, led, victim.Process.Pid) // reapable once its spawner is gone
			s.Process.Kill()
			s.Wait()
			named := hz.plant(t, led)
			top := filepath.Dir(filepath.Dir(led))
			before := tree(t, top)
			marker := filepath.Join(t.TempDir(), "ran")
			for _, args := range [][]string{
				{"ps"}, {"register", "--pid", pid}, {"stop", pid}, {"reap", "--all"},
				{"run", "--", "touch", marker},
			} {
				r := runCLI(t, append([]string{"--ledger", led}, args...)...)
				checkOneLineError(t, args[0], r, 1)
				if !strings.Contains(r.stderr, named) {
					t.Errorf("%s: stderr %q does not name %s", args[0], r.stderr, named)
				}
			}
			r := runCLI(t, "--ledger", led, "doctor", "--json")
			var rep struct{ Ledger struct{ Trust string } }
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 {
				t.Errorf("doctor: exit %d, %v (%q)", r.code, err, r.stdout)
			}
			if hz.name != "ledger above the size limit" && !strings.Contains(rep.Ledger.Trust, named) {
				t.Errorf("doctor's trust %q does not name %s", rep.Ledger.Trust, named)
			}
			if !alive(t, victim.Process.Pid) {
				t.Errorf("the registered process was signalled")
			}
			if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("run started its command: %v", err)
			}
			if after := tree(t, top); !slices.Equal(before, after) {
				t.Errorf("files changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// TestLockSymlinkCreatesNothing: a lock planted as a symbolic link is refused, and no file
// appears where it points (custody as root would otherwise create it anywhere).
func TestLockSymlinkCreatesNothing(t *testing.T) {
	led := ledgerPath(t)
	must(t, os.MkdirAll(filepath.Dir(led), 0o700))
	target := filepath.Join(t.TempDir(), "created-by-custody")
	must(t, os.Symlink(target, led+".lock"))
	r := runCLI(t, "--ledger", led, "register", "--pid", strconv.Itoa(cat(t)))
	checkOneLineError(t, "register", r, 1)
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link's target: %v, want it absent", err)
	}
	if _, err := os.Lstat(led); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a ledger was written: %v", err)
	}
}

// TestOtherUsersProcess: as root, a row naming an ordinary user's process licenses no signal
// (stop and reap say no-authority, exit 3, and it lives); as an ordinary user, register refuses
// root's process.
func TestOtherUsersProcess(t *testing.T) {
	testproc.RequireRoot(t)
	led := ledgerPath(t)
	cmd := exec.Command("cat")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	theirs := reaped(t, cmd)
	s := registerVia(t, led, theirs.Process.Pid) // root may register it
	s.Process.Kill()
	s.Wait()
	out, r := stopJSON(t, led, strconv.Itoa(theirs.Process.Pid))
	if len(out) != 1 || out[0].Outcome != "no-authority" || !strings.Contains(out[0].Reason, "uid 65534") || r.code != 3 {
		t.Errorf("stop: %+v, exit %d; want no-authority naming uid 65534, exit 3", out, r.code)
	}
	for _, flags := range [][]string{{"--all", "--dry-run"}, {"--all"}} {
		ds, r := reapJSON(t, led, flags...)
		if d := ds[theirs.Process.Pid]; d.Action != "keep" || d.Reason != "other-user" || d.Result != nil || r.code != 0 {
			t.Errorf("reap %v: %+v, exit %d; want keep other-user, exit 0", flags, d, r.code)
		}
	}
	if !alive(t, theirs.Process.Pid) {
		t.Fatalf("the ordinary user's process was signalled")
	}

	// As uid 65534, in a ledger directory of its own.
	base := t.TempDir()
	must(t, os.Chmod(filepath.Dir(base), 0o755))
	must(t, os.Chmod(base, 0o755))
	own := filepath.Join(base, "nobody")
	must(t, os.Mkdir(own, 0o700))
	must(t, os.Chown(own, nobody, nobody))
	mine := cat(t)
	r = runCmd(t, testproc.Helper(t, "custody-as-nobody", "--ledger", filepath.Join(own, "l.json"),
		"register", "--pid", strconv.Itoa(mine)))
	checkOneLineError(t, "register of root's process by uid 65534", r, 1)
	if !strings.Contains(r.stderr, "runs as uid 0") {
		t.Errorf("stderr %q does not say whom it runs as", r.stderr)
	}
	r = runCmd(t, testproc.Helper(t, "custody-as-nobody", "--ledger", filepath.Join(own, "l.json"),
		"register", "--pid", strconv.Itoa(theirs.Process.Pid)))
	if r.code != 0 {
		t.Errorf("register of its own process by uid 65534: %+v", r)
	}
}

// TestProtected: stop refuses init and its own calling shell, register refuses them too, all
// with no-authority and the reason, and the shell lives to report it.
func TestProtected(t *testing.T) {
	led := ledgerPath(t)
	exe, err := os.Executable()
	must(t, err)
	sh := exec.Command("sh", "-c", `read go; "$0" --ledger "$1" stop --json 1 $$; echo "status $?"; "$0" --ledger "$1" register --pid $$; echo "status $?"`, exe, led)
	sh.Env = append(os.Environ(), testproc.Env("custody"))
	p := testproc.Start(t, sh)
	for _, pid := range []int{1, p.Process.Pid} {
		inc, err := procid.Read(pid)
		must(t, err)
		if _, err := ledger.Open(led).Add(context.Background(), ledger.NewRow(inc, procid.Incarnation{})); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintln(p.Stdin(), "go")
	var out strings.Builder
	for {
		line := p.Line(30 * time.Second)
		if strings.HasPrefix(line, "status ") {
			if line != "status 3" {
				t.Errorf("stop: %s, want status 3", line)
			}
			break
		}
		out.WriteString(line)
	}
	var res []outcome
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
		t.Fatalf("stop output %q: %v", out.String(), err)
	}
	for i, want := range []string{"it is init", "an ancestor of custody"} {
		if i >= len(res) || res[i].Outcome != "no-authority" || !strings.Contains(res[i].Reason, want) {
			t.Errorf("outcomes %+v; want no-authority, %q", res, want)
		}
	}
	if line := p.Line(30 * time.Second); line != "status 1" {
		t.Errorf("register of the calling shell: %s, want status 1", line)
	}
	r := runCLI(t, "--ledger", led, "register", "--pid", "1")
	checkOneLineError(t, "register --pid 1", r, 1)
	if after, err := procid.Read(1); err != nil || after.PID != 1 {
		t.Errorf("init after: %v", err)
	}
}

// TestConcurrentStops: two stops of one PID both succeed; the one that comes second says
// already-exited, never no-authority, though the first dropped the row.
func TestConcurrentStops(t *testing.T) {
	led := ledgerPath(t)
	for round := range 3 {
		p := reaped(t, exec.Command("cat"))
		pid := strconv.Itoa(p.Process.Pid)
		if r := runCLI(t, "--ledger", led, "register", "--pid", pid); r.code != 0 {
			t.Fatalf("register: %+v", r)
		}
		results := make(chan []outcome, 2)
		codes := make(chan int, 2)
		for range 2 {
			go func() {
				r := runCLI(t, "--ledger", led, "stop", "--json", pid)
				var out []outcome
				json.Unmarshal([]byte(r.stdout), &out)
				results <- out
				codes <- r.code
			}()
		}
		for range 2 {
			out, code := <-results, <-codes
			if code != 0 || len(out) != 1 || (out[0].Outcome != "exited" && out[0].Outcome != "already-exited") {
				t.Errorf("round %d: %+v, exit %d; want exited or already-exited, exit 0", round, out, code)
			}
		}
		out, r := stopJSON(t, led, pid)
		if r.code != 0 || len(out) != 1 || out[0].Outcome != "already-exited" {
			t.Errorf("round %d: a later stop: %+v, exit %d; want already-exited, exit 0", round, out, r.code)
		}
	}
}

// TestStopStatusAfterSignal: when the ledger cannot be written after the signals (here its lock
// is held past the timeout), stop still reports the outcomes, and exits 4, never a status that
// says nothing was signalled.
func TestStopStatusAfterSignal(t *testing.T) {
	led := ledgerPath(t)
	p := reaped(t, exec.Command("cat"))
	pid := strconv.Itoa(p.Process.Pid)
	if r := runCLI(t, "--ledger", led, "register", "--pid", pid); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	unlock := holdLock(t, led)
	defer unlock()
	out, r := stopJSON(t, led, pid)
	if len(out) != 1 || out[0].Outcome != "exited" {
		t.Errorf("outcomes %+v; want exited", out)
	}
	if r.code != 4 || !strings.Contains(r.stderr, "custody: error: ") {
		t.Errorf("exit %d, stderr %q; want 4 and the error", r.code, r.stderr)
	}
	if alive(t, p.Process.Pid) {
		t.Errorf("the process lives")
	}
}

// TestSIGTERMWhileLocked: SIGTERM ends a verb that waits for the lock at once, not after the lock
// timeout (exit 11), and it writes nothing.
func TestSIGTERMWhileLocked(t *testing.T) {
	led := ledgerPath(t)
	if r := runCLI(t, "--ledger", led, "register", "--pid", strconv.Itoa(cat(t))); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	before, err := os.ReadFile(led)
	must(t, err)
	unlock := holdLock(t, led)
	defer unlock()
	cmd := testproc.Helper(t, "custody", "--ledger", led, "register", "--pid", strconv.Itoa(cat(t)))
	p := testproc.Start(t, cmd)
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	var werr error
	testproc.WaitFor(t, 30*time.Second, func() error {
		select {
		case werr = <-done:
			return nil
		default:
			p.Process.Signal(syscall.SIGTERM) // again until it ends: the first may precede its handler
			return errors.New("still running")
		}
	})
	if ee, ok := errors.AsType[*exec.ExitError](werr); !ok || ee.ExitCode() == 11 || ee.ExitCode() == 0 {
		t.Errorf("register after SIGTERM: %v; want an end by the signal or exit 1, not the lock timeout", werr)
	}
	if after, _ := os.ReadFile(led); string(after) != string(before) {
		t.Errorf("the ledger changed")
	}
}

// holdLock takes the ledger's lock as a writer would, until the returned undo.
func holdLock(t *testing.T, led string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(led+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	must(t, err)
	must(t, unix.Flock(int(f.Fd()), unix.LOCK_EX))
	return func() { f.Close() }
}

// tree lists every name under dir with its mode, owner and size.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v %d %d", p, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, fi.Size()))
		return nil
	})
	must(t, err)
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestReapEndsOnSIGTERM: SIGTERM to a reap in the middle of one stop ends it at once: the row
// being stopped reports timed-out, the next row's process is not signalled, and the exit says
// that something was (3).
func TestReapEndsOnSIGTERM(t *testing.T) {
	led := ledgerPath(t)
	first := reaped(t, testproc.Helper(t, "catch-term"))
	first.Expect("ready", 10*time.Second)
	second := reaped(t, exec.Command("cat"))
	for _, p := range []*testproc.Proc{first, second} {
		s := registerVia(t, led, p.Process.Pid)
		s.Process.Kill()
		s.Wait()
	}
	cmd := testproc.Helper(t, "custody", "--ledger", led, "reap", "--all", "--json", "--grace", "1m")
	var out strings.Builder
	cmd.Stdout = &out
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	first.Expect("term", 30*time.Second) // the reap is in the first stop's grace
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	var err error
	select {
	case err = <-done:
		done <- err // for the cleanup
	case <-time.After(30 * time.Second): // a hang guard: the grace is a minute
		t.Fatal("reap did not end on SIGTERM")
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 3 {
		t.Errorf("reap after SIGTERM: %v; want exit 3 (stdout %q)", err, out.String())
	}
	if !alive(t, second.Process.Pid) {
		t.Errorf("the second row's process was signalled after the SIGTERM")
	}
}
