//go:build unix

package custody_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
)

func init() {
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

// A process that calls Init acts as a gate only when it was started as one: gate variables it
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
