package cli_test

import (
	"bytes"
	"errors"
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
)

func init() { testproc.Register("pid1-exec", helperPID1Exec) }

// pid1Tree is the child both inits run: it leaves eight orphans that exit at once (each a
// zombie until its new parent, the init, reaps it), traps the six signals an init passes on and
// says which it got, and exits 7 once the file $1 exists.
const pid1Tree = `for s in TERM INT HUP USR1 USR2 QUIT; do trap "echo got $s" $s; done
for i in 1 2 3 4 5 6 7 8; do (sh -c 'exit 0' &); done
echo ready
while [ ! -e "$1" ]; do sleep 0.02; done
exit 7`

// TestPID1 runs custody run and Debian's tini, each as PID 1 of a PID namespace, on the same
// tree: neither leaves a zombie, each passes TERM, INT, HUP, USR1, USR2 and QUIT to the child,
// and each exits with the child's status.
func TestPID1(t *testing.T) {
	testproc.RequireRoot(t)
	tini, err := exec.LookPath("tini")
	if err != nil {
		testproc.Skip(t, "tini is not installed (apt-get install -y tini): %v", err)
	}
	for _, init := range []string{"custody", tini} {
		t.Run(filepath.Base(init), func(t *testing.T) {
			dir := t.TempDir()
			done := filepath.Join(dir, "done")
			cmd := testproc.Helper(t, "pid1-exec", init, filepath.Join(dir, "l.json"), pid1Tree, done)
			testproc.NewPIDNamespace(cmd)
			p := testproc.Start(t, cmd)
			p.Expect("ready", 30*time.Second)
			testproc.WaitFor(t, 15*time.Second, func() error {
				if z := zombieChildren(p.Process.Pid); len(z) > 0 {
					return fmt.Errorf("%s as PID 1 leaves zombies %v", filepath.Base(init), z)
				}
				return nil
			})
			for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1,
				syscall.SIGUSR2, syscall.SIGQUIT} {
				if err := p.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				name := strings.TrimPrefix(sigName(sig), "SIG")
				p.Expect("got "+name, 10*time.Second)
			}
			if err := os.WriteFile(done, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			var ee *exec.ExitError
			if err := p.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
				t.Fatalf("%s as PID 1 exited with %v; want the child's status 7", filepath.Base(init), err)
			}
		})
	}
}

func sigName(s syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGINT: "INT", syscall.SIGHUP: "HUP",
		syscall.SIGUSR1: "USR1", syscall.SIGUSR2: "USR2", syscall.SIGQUIT: "QUIT"}[s]
}

// zombieChildren lists pid's children that are zombies, from every thread's children file.
func zombieChildren(pid int) []int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, f := range bytes.Fields(b) {
			c, _ := strconv.Atoi(string(f))
			st, err := os.ReadFile("/proc/" + string(f) + "/stat")
			if i := bytes.LastIndexByte(st, ')'); err == nil && i >= 0 && i+2 < len(st) && st[i+2] == 'Z' {
				out = append(out, c)
			}
		}
	}
	return out
}

// helperPID1Exec runs as PID 1 of a new PID namespace: it mounts the namespace's /proc and execs
// the init named by args[0] ("custody" for custody run, else a path: tini) on sh -c args[2],
// with args[3] as $1; custody records in the ledger args[1].
func helperPID1Exec(args []string) int {
	if err := testproc.MountProc(); err != nil {
		fmt.Printf("skip mount proc: %v\n", err)
		return 1
	}
	init, led, script, done := args[0], args[1], args[2], args[3]
	env := os.Environ()
	argv := []string{init, "--", "sh", "-c", script, "sh", done}
	if init == "custody" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Println(err)
			return 1
		}
		init = exe
		env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CUSTODY_TEST_HELPER=") }),
			testproc.Env("custody"))
		argv = []string{exe, "--ledger", led, "run", "--quiet", "--", "sh", "-c", script, "sh", done}
	}
	err := syscall.Exec(init, argv, env)
	fmt.Printf("exec %s: %v\n", init, err)
	return 1
}
