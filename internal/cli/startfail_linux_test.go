package cli_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
)

// TestRunStartFailures: custody run meets every fault of its ledger and exits 1, or 11 for a held
// lock, with an error and never a panic; nothing it started survives it, and under a held lock
// the child never ran. The unreadable ledger is read as an ordinary user, whom root's mode bits
// do not bind.
func TestRunStartFailures(t *testing.T) {
	testproc.RequireRoot(t)
	type failure struct {
		name   string
		locked bool
		make   func(t testing.TB, path string)
		nobody bool
	}
	var cases []failure
	for _, f := range testproc.LedgerFaults() {
		cases = append(cases, failure{name: f.Name, locked: f.Locked, make: f.Make})
	}
	cases = append(cases, failure{name: "ledger unreadable", nobody: true, make: func(t testing.TB, path string) {
		err := os.WriteFile(path, []byte("[]\n"), 0)
		if err == nil {
			err = os.Chown(path, 65534, 65534) // the user's own ledger, mode 0000
		}
		if err != nil {
			t.Fatal(err)
		}
	}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state", "spawn-ledger.json")
			ran := filepath.Join(dir, "ran")
			cmd := testproc.Helper(t, "custody", "--ledger", path, "run", "--",
				"sh", "-c", "touch "+ran+"; sleep 1000 & wait")
			if tc.nobody {
				asNobody(t, cmd, dir)
			}
			tc.make(t, path)
			mark := testproc.Mark()
			testproc.CleanupMarked(t, mark)
			cmd.Env = append(cmd.Env, mark)
			r := runCmd(t, cmd)
			t.Logf("exit %d: %s", r.code, r.stderr)
			want := 1
			if tc.locked {
				want = 11
			}
			if r.code != want || !strings.HasPrefix(r.stderr, "custody: error: ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("exit %d, want %d; stderr %q", r.code, want, r.stderr)
			}
			testproc.NoSurvivors(t, mark, 5*time.Second)
			if _, err := os.Stat(ran); tc.locked && err == nil {
				t.Errorf("exit 11, but the child ran")
			}
		})
	}
}

// asNobody makes cmd run as uid and gid 65534 from a copy of the test binary in dir, which it
// gives to that user with the path to it: the build's own directory is root's alone.
func asNobody(t *testing.T, cmd *exec.Cmd, dir string) {
	const nobody = 65534
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyExe := filepath.Join(dir, "custody.test")
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(copyExe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		err = errors.Join(err, dst.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir, filepath.Join(dir, "state"), copyExe} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Path, cmd.Args[0] = copyExe, copyExe
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	t.Cleanup(func() { // give the files back, for t.TempDir's removal
		filepath.Walk(filepath.Dir(dir), func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 0, 0) })
	})
}

// TestDoctorUnreadable: a ledger its user cannot read is reported as unreadable, not as corrupt:
// nothing would move it aside. Doctor changes nothing and exits 1.
func TestDoctorUnreadable(t *testing.T) {
	testproc.RequireRoot(t) // to run as another user
	dir := t.TempDir()
	cmd := testproc.Helper(t, "custody")
	asNobody(t, cmd, dir)
	led := filepath.Join(dir, "state", "spawn-ledger.json")
	if err := os.WriteFile(led, []byte("[]"), 0o000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(led, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd.Args = append(cmd.Args, "--ledger", led, "doctor")
	r := runCmd(t, cmd)
	if r.code != 1 || !strings.Contains(r.stdout, "unreadable: ") || strings.Contains(r.stdout, "corrupt") {
		t.Errorf("doctor on an unreadable ledger: %+v", r)
	}
	if b, err := os.ReadFile(led); err != nil || string(b) != "[]" {
		t.Errorf("doctor changed the ledger: %q, %v", b, err)
	}
}
