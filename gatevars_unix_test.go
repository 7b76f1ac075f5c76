//go:build unix

package custody_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/scope"
)

// envInitMark, when set, names a directory in which this test binary's package initialisation
// leaves an empty file named by its PID: see TestGateBeforeInits.
const envInitMark = "CUSTODY_TEST_INIT_MARK"

func init() {
	if dir := os.Getenv(envInitMark); dir != "" {
		os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), nil, 0o600)
	}
	// main-ran prints "main ran" and the environment's CUSTODY_GATE_ variables, one a line.
	testproc.Register("main-ran", func([]string) int {
		os.Stdout.WriteString("main ran\n")
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "CUSTODY_GATE_") {
				os.Stdout.WriteString(kv + "\n")
			}
		}
		return 0
	})
}

// A binary that links custody acts as a gate only when it was started as one: gate variables it
// inherited from elsewhere, naming a file, a descriptor it does not have, or a pipe that is not
// the gate's, neither make it exec another program nor make it exit; its main runs, and the
// variables are gone from its environment (nothing it starts inherits them).
func TestGateVariablesFromElsewhere(t *testing.T) {
	file := filepath.Join(testproc.TempDir(t), "f")
	if err := os.WriteFile(file, []byte{1}, 0o600); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pw.Write([]byte{1})
	pw.Close()
	for _, tc := range []struct {
		desc  string
		fd    string
		extra func(t *testing.T) *os.File
	}{
		{"a file on 3", "3", func(t *testing.T) *os.File {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}},
		{"a pipe of someone else's on 3", "3", func(*testing.T) *os.File { return pr }},
		{"a descriptor it does not have", "999", nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), testproc.Env("main-ran"), "CUSTODY_GATE_FD="+tc.fd,
				"CUSTODY_GATE_PATH=/bin/echo", "CUSTODY_GATE_PIPE=0:0")
			if tc.extra != nil {
				cmd.ExtraFiles = []*os.File{tc.extra(t)}
			}
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != "main ran\n" {
				t.Errorf("with gate variables from elsewhere: %v, output %q; want its main to run, and no variable left", err, out)
			}
		})
	}
}

// A gated child waits at its gate before the binary's other packages are initialised: this test
// package's init, which leaves a mark when told to, runs in neither a gate that never opens nor
// one that execs its program, though it does run when the binary is started by hand.
func TestGateBeforeInits(t *testing.T) {
	t.Setenv(scope.EnvContainment, "process-group")
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	start := func(o *custody.Owner) (*custody.Child, error) {
		cmd := exec.Command("sh", "-c", "touch "+ran)
		cmd.Env = append(os.Environ(), envInitMark+"="+dir)
		return o.Start(context.Background(), cmd, custody.StartOptions{})
	}
	o := newOwner(t)
	t.Run("never opened", func(t *testing.T) {
		custody.FailStartAt(t, "cover", errors.New("no coverage"))
		if _, err := start(o); err == nil {
			t.Fatal("start succeeded without coverage")
		}
		// Start killed and reaped the gate before it returned: had it not been a gate, the
		// program would have run.
		if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the child ran before it was covered (%v): it was no gate", err)
		}
	})
	c, err := start(o)
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the gate did not exec its program: %v", err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"ran"}) {
		t.Errorf("%s holds %q: a gate ran this binary's package initialisation (a file named by its PID)", dir, names)
	}
	// The mark works: the binary started by hand leaves it.
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), testproc.Env("main-ran"), envInitMark+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the binary by hand: %v, %s", err, out)
	}
	if names := dirNames(t, dir); !slices.Contains(names, strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("%s holds %q, and no mark of the binary started by hand (%d)", dir, names, cmd.Process.Pid)
	}
}

// dirNames lists a directory's names, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
