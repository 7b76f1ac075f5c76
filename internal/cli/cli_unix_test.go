//go:build unix

package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/tag"
)

func cat(t *testing.T) int {
	return testproc.Start(t, exec.Command("cat")).Process.Pid
}

// TestBadInput: bad input gets one line on stderr, a non-zero exit, and leaves the ledger as it was.
func TestBadInput(t *testing.T) {
	led := ledgerPath(t)
	if r := runCLI(t, "--ledger", led, "register", "--pid", strconv.Itoa(cat(t))); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	before, err := os.ReadFile(led)
	if err != nil {
		t.Fatal(err)
	}
	dead := testproc.Start(t, exec.Command("cat"))
	dead.Stdin().Close()
	dead.Wait()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	tests := []struct {
		desc string
		args []string
		code int
	}{
		{"pid not a number", []string{"register", "--pid", "abc"}, 2},
		{"pid zero", []string{"register", "--pid", "0"}, 2},
		{"pid negative", []string{"register", "--pid", "-3"}, 2},
		{"pid missing", []string{"register"}, 2},
		{"dead pid", []string{"register", "--pid", strconv.Itoa(dead.Process.Pid)}, 1},
		{"unknown flag", []string{"register", "--pidd", "5"}, 2},
		{"unknown command", []string{"frobnicate"}, 2},
		{"extra argument", []string{"ps", "extra"}, 2},
	}
	for _, tc := range tests {
		r := runCLI(t, append([]string{"--ledger", led}, tc.args...)...)
		checkOneLineError(t, tc.desc, r, tc.code)
		if after, _ := os.ReadFile(led); !bytes.Equal(before, after) {
			t.Errorf("%s: ledger changed", tc.desc)
		}
	}
	// A ledger whose directory cannot be created: its parent is a regular file.
	bad := filepath.Join(file, "sub", "spawn-ledger.json")
	r := runCLI(t, "--ledger", bad, "register", "--pid", strconv.Itoa(cat(t)))
	checkOneLineError(t, "uncreatable directory", r, 1)
	if fi, _ := os.Stat(file); fi.Size() != 0 || !fi.Mode().IsRegular() {
		t.Errorf("the file in the way was changed")
	}
}

// TestRegisterAndPs: a registered process is listed alive with its spawner (the calling process,
// here the test) alive; install filtering hides it from another install unless --all.
func TestRegisterAndPs(t *testing.T) {
	led := ledgerPath(t)
	pid := cat(t)
	g := []string{"--ledger", led, "--install-root", "/opt/a"}
	if r := runCLI(t, append(g, "register", "--pid", strconv.Itoa(pid), "--purpose", "gateway", "--keep")...); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	r := runCLI(t, append(g, "ps", "--json")...)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || r.code != 0 {
		t.Fatalf("ps --json: %v (%+v)", err, r)
	}
	if len(rows) != 1 {
		t.Fatalf("ps --json rows = %v", rows)
	}
	row := rows[0]
	want := map[string]any{"pid": float64(pid), "purpose": "gateway", "state": "alive",
		"spawner_state": "alive", "spawner_pid": float64(os.Getpid()), "reapable": false}
	for k, v := range want {
		if row[k] != v {
			t.Errorf("ps --json %s = %v, want %v", k, row[k], v)
		}
	}
	r = runCLI(t, append(g, "ps")...)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "PID") || !strings.Contains(lines[1], strconv.Itoa(pid)) ||
		!strings.Contains(lines[1], "gateway") || !strings.Contains(lines[1], "cat") {
		t.Errorf("ps table:\n%s", r.stdout)
	}
	if strings.Index(lines[0], "STATE") != strings.Index(lines[1], "alive") {
		t.Errorf("ps table columns not aligned:\n%s", r.stdout)
	}
	// Every install's rows by default; --install narrows to one.
	other := []string{"--ledger", led, "--install-root", "/opt/b"}
	if r := runCLI(t, append(other, "ps", "--json")...); !strings.Contains(r.stdout, `"gateway"`) {
		t.Errorf("ps from another install misses the row: %q", r.stdout)
	}
	if r := runCLI(t, "--ledger", led, "ps", "--json", "--install", tag.Install("/opt/b")); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ps --install of another install lists %q", r.stdout)
	}
	if r := runCLI(t, "--ledger", led, "ps", "--json", "--install", tag.Install("/opt/a")); !strings.Contains(r.stdout, `"gateway"`) {
		t.Errorf("ps --install of the row's install misses it: %q", r.stdout)
	}
}

// TestPsSanitises: fields another program wrote with a tab, a newline or a terminal escape are
// shown quoted and escaped: the table keeps one line per row and as many fields as its header,
// and no control character reaches the terminal.
func TestPsSanitises(t *testing.T) {
	led := ledgerPath(t)
	pid := cat(t)
	if r := runCLI(t, "--ledger", led, "register", "--pid", strconv.Itoa(pid)); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	inc, err := procid.Read(cat(t))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 100)
	mergeRaw(t, led, fmt.Sprintf(`[{"pid": %d, "create_time": %f, "purpose": "evil\tpurpose\u001b[31m", "install": "a b",
		"argv": "prog --flag\nsecond line \u001b]0;title\u0007 %s", "spawner_pid": null}]`, inc.PID, inc.CreateTime, long))
	r := runCLI(t, "--ledger", led, "ps")
	if r.code != 0 {
		t.Fatalf("ps: %+v", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("ps printed %d lines for 2 rows:\n%s", len(lines), r.stdout)
	}
	if strings.ContainsAny(r.stdout, "\t\x1b\x07") {
		t.Errorf("a control character reached the output: %q", r.stdout)
	}
	for _, want := range []string{`"evil\tpurpose\x1b[31m"`, `"a b"`, `"prog --flag\nsecond line \x1b]0;title\a xx`, `x"…`} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("ps row without %s:\n%s", want, lines[2])
		}
	}
	header, plain := strings.Fields(lines[0]), strings.Fields(lines[1])
	if len(plain) != len(header) || len(header) != 11 {
		t.Errorf("header has %d fields, a plain row %d, want 11 each:\n%s", len(header), len(plain), r.stdout)
	}
}

// TestPsCorrupt: ps on a corrupt ledger says so in one line and exits 1, and moves nothing (a
// listing changes nothing); the next write moves the bytes aside.
func TestPsCorrupt(t *testing.T) {
	led := ledgerPath(t)
	os.MkdirAll(filepath.Dir(led), 0o700)
	os.WriteFile(led, []byte("{garbage"), 0o600)
	for _, args := range [][]string{{"ps"}, {"ps", "--json"}} {
		r := runCLI(t, append([]string{"--ledger", led}, args...)...)
		checkOneLineError(t, strings.Join(args, " ")+" on a corrupt ledger", r, 1)
		if !strings.Contains(r.stderr, "corrupt") {
			t.Errorf("%v on a corrupt ledger: stderr %q does not say so", args, r.stderr)
		}
		if b, _ := os.ReadFile(led); string(b) != "{garbage" {
			t.Fatalf("%v changed the corrupt ledger: %q", args, b)
		}
		if _, err := os.Stat(led + ".corrupt"); err == nil {
			t.Fatalf("%v quarantined the corrupt ledger", args)
		}
	}
	runCLI(t, "--ledger", led, "reap") // a writer: it moves the file aside (and fails, see TestReapCorrupt)
	if b, _ := os.ReadFile(led + ".corrupt"); string(b) != "{garbage" {
		t.Errorf("after a write, .corrupt holds %q", b)
	}
	if r := runCLI(t, "--ledger", led, "doctor"); r.code != 0 || !strings.Contains(r.stdout, ".corrupt") {
		t.Errorf("doctor after quarantine: %+v", r)
	}
}

// TestPsStatesNotRewritable: ps --json replaces the state fields another program wrote in a row,
// also when their names are spelled with escapes; when that row cannot be rewritten (a NaN, which
// the ledger keeps byte for byte), ps fails with one line instead of passing the other program's
// states off as its own.
func TestPsStatesNotRewritable(t *testing.T) {
	self, err := procid.Self() // a live process for the row
	if err != nil {
		t.Fatal(err)
	}
	led := ledgerPath(t)
	os.MkdirAll(filepath.Dir(led), 0o700)
	for _, tc := range []struct {
		state, load string
		code        int
	}{{"state", "0.5", 0}, {`st\u0061te`, "0.5", 0}, {"state", "NaN", 1}} {
		row := fmt.Sprintf(`[{"pid": %d, "create_time": %.3f, "purpose": "serve", "load": %s, "%s": "gone", "spawner_%[4]s": "gone"}]`,
			self.PID, self.CreateTime, tc.load, tc.state)
		if err := os.WriteFile(led, []byte(row), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "--ledger", led, "ps", "--all", "--json")
		if r.code != tc.code {
			t.Errorf("load %s: exit %d, want %d (stderr %q)", tc.load, r.code, tc.code, r.stderr)
		}
		if tc.code != 0 {
			checkOneLineError(t, "ps --json over a NaN row naming state", r, tc.code)
			continue
		}
		if strings.Count(r.stdout, `"state"`) != 1 || strings.Contains(r.stdout, "gone") {
			t.Errorf("%s, load %s: the other program's state passed through: %s", tc.state, tc.load, r.stdout)
		}
	}
}

// TestDoctor: doctor reports the machine's features and the ledger, as text and as JSON, and a
// corrupt ledger makes it fail without moving the file.
func TestDoctor(t *testing.T) {
	led := ledgerPath(t)
	r := runCLI(t, "--ledger", led, "doctor", "--json")
	var rep struct {
		Features []struct {
			Name string
			OK   bool
		}
		Ledger struct{ Path string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("doctor --json: %v (%+v)", err, r)
	}
	if rep.Ledger.Path != led || len(rep.Features) == 0 {
		t.Errorf("doctor --json = %+v", rep)
	}
	if runtime.GOOS == "linux" { // the pidfs line says what the probe found
		i := slices.IndexFunc(rep.Features, func(f struct {
			Name string
			OK   bool
		}) bool {
			return f.Name == "pidfs ids"
		})
		if want := procid.PidfsError() == nil; i < 0 || rep.Features[i].OK != want {
			t.Errorf("doctor --json features %+v; want pidfs ids ok=%v", rep.Features, want)
		}
	}
	os.MkdirAll(filepath.Dir(led), 0o700)
	os.WriteFile(led, []byte("nope"), 0o600)
	if r := runCLI(t, "--ledger", led, "doctor"); r.code != 1 || !strings.Contains(r.stdout, "corrupt") {
		t.Errorf("doctor on a corrupt ledger: %+v", r)
	}
	if b, _ := os.ReadFile(led); string(b) != "nope" {
		t.Errorf("doctor changed the corrupt ledger")
	}
}

// TestSuperviseDiesOnSIGTERM: `custody supervise` keeps SIGTERM's default action, as the
// supervisor custody.Init starts does: the command line's own signal handling, which the other
// verbs use for their cleanup, must not make it immune.
func TestSuperviseDiesOnSIGTERM(t *testing.T) {
	cmd := testproc.Helper(t, "custody", "supervise") // Start holds its stdin open
	ready, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = append(cmd.Env, "CUSTODY_SUPERVISOR_READY_FD=3")
	p := testproc.Start(t, cmd)
	w.Close()
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		t.Fatalf("supervisor not ready: %v", err)
	}
	if err := p.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(10 * time.Second):
		p.Process.Kill()
		<-waited
		t.Fatal("custody supervise still runs 10 s after SIGTERM")
	}
	ws, ok := p.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("custody supervise after SIGTERM: %v; want killed by SIGTERM", err)
	}
}

// TestSuperviseForms: `custody supervise` takes the owner's group in the Hermes supervisor's
// forms too (a bare P, --parent-pgid P), refuses to run inside that group, and exits 3 when its
// v2 socket cannot be set up, leaving what is at the path alone.
func TestSuperviseForms(t *testing.T) {
	own := strconv.Itoa(syscall.Getpgrp()) // the helper runs in the test's group
	for _, args := range [][]string{{"supervise", own}, {"supervise", "--parent-pgid", own}, {"supervise", "--owner-pgid", own}} {
		r := runCLI(t, args...)
		checkOneLineError(t, strings.Join(args, " "), r, 2)
		if !strings.Contains(r.stderr, "process group "+own) {
			t.Errorf("%v: %q does not name the process group", args, r.stderr)
		}
	}
	for _, args := range [][]string{{"supervise", "4194303"}, {"supervise", "--parent-pgid", "4194303"}} {
		if r := runCLI(t, args...); r.code != 0 || r.stderr != "" { // stdin is empty: EOF at once
			t.Errorf("%v: %+v, want exit 0", args, r)
		}
	}
	taken := filepath.Join(t.TempDir(), "taken")
	if err := os.WriteFile(taken, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{taken, filepath.Join(taken, "under-a-file"), "/" + strings.Repeat("x", 200)} {
		r := runCLI(t, "supervise", "4194303", "--socket-path", path)
		checkOneLineError(t, "--socket-path "+path, r, 3)
	}
	if b, err := os.ReadFile(taken); err != nil || string(b) != "mine" {
		t.Errorf("the file at the socket path: %q, %v", b, err)
	}
	sock := filepath.Join(t.TempDir(), "s")
	if r := runCLI(t, "supervise", "4194303", "--socket-path", sock); r.code != 0 || r.stdout != "ready\n" {
		t.Errorf("v2 form: %+v, want ready and exit 0", r)
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Errorf("the socket outlived the supervisor")
	}
}

// TestHermesHome: one setting, --hermes-home or $CUSTODY_HERMES_HOME, points the ledger, the
// install id and the tag variable at Hermes's; each flag given beside it wins for its part.
func TestHermesHome(t *testing.T) {
	home := t.TempDir()
	led := filepath.Join(home, "spawn-ledger.json")
	cmd := testproc.Helper(t, "custody", "run", "--purpose", "serve", "--", "sh", "-c", `echo "$HERMES_SPAWN"`)
	cmd.Env = append(cmd.Env, "CUSTODY_HERMES_HOME="+home)
	r := runCmd(t, cmd)
	tg, err := tag.Parse(strings.TrimSpace(r.stdout))
	if r.code != 0 || err != nil || tg.Install != tag.Install(home) || tg.Purpose != "serve" {
		t.Fatalf("custody run under $CUSTODY_HERMES_HOME: %+v; tag %+v, %v; want HERMES_SPAWN naming install %s", r, tg, err, tag.Install(home))
	}
	pid := strconv.Itoa(cat(t))
	if r := runCLI(t, "--hermes-home", home, "register", "--pid", pid); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	body, err := os.ReadFile(led)
	if err != nil || !strings.Contains(string(body), `"install":"`+tag.Install(home)+`"`) {
		t.Fatalf("%s: %s, %v; want a row of install %s", led, body, err, tag.Install(home))
	}
	other := filepath.Join(t.TempDir(), "other.json")
	if r := runCLI(t, "--hermes-home", home, "--ledger", other, "--install-root", "/opt/x", "register", "--pid", pid); r.code != 0 {
		t.Fatalf("register with overrides: %+v", r)
	}
	if body, err := os.ReadFile(other); err != nil || !strings.Contains(string(body), tag.Install("/opt/x")) {
		t.Errorf("--ledger and --install-root beside --hermes-home: %s, %v", body, err)
	}
}

// TestBashCompletion: the bash script completes commands, a command's flags, and after run's "--"
// the commands the shell knows.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skipf("skipping: no bash: %v", err)
	}
	r := runCLI(t, "completion", "bash")
	script := filepath.Join(t.TempDir(), "custody.bash")
	if err := os.WriteFile(script, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ words, want string }{
		{"custody r", "reap register run"},
		{"custody run --gr", "--grace"},
		{"custody --ledger x ps --j", "--json"},
		{"custody completion f", "fish"},
		{"custody run -- ech", "echo"},
	} {
		words := strings.Fields(tc.words)
		prog := fmt.Sprintf(`source %q; COMP_WORDS=(%s); COMP_CWORD=%d; _custody; echo "${COMPREPLY[*]}"`,
			script, tc.words, len(words)-1)
		out, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("completing %q: %q (%v), want %q", tc.words, out, err, tc.want)
		}
	}
}

// TestSuperviseMessages: the supervisor's warnings read like every other custody message.
func TestSuperviseMessages(t *testing.T) {
	cmd := testproc.Helper(t, "custody", "supervise")
	cmd.Stdin = strings.NewReader("register 1\n")
	r := runCmd(t, cmd)
	if r.code != 0 || !strings.HasPrefix(r.stderr, "custody: warning: supervise: refused target: pgid=1 ") ||
		strings.Contains(r.stderr, "level=") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("supervise with a refused line: %+v", r)
	}
}

// TestReRegisterKeepsScope: `custody register` of a child that `custody run` started (the same
// incarnation) replaces its row but keeps what the new row does not know: the scope, its owner,
// its containment; so a later stop still stops the whole scope.
func TestReRegisterKeepsScope(t *testing.T) {
	led := filepath.Join(t.TempDir(), "state", "ledger.json")
	run := testproc.Start(t, testproc.Helper(t, "custody", "--ledger", led, "run", "--purpose", "worker", "--", "cat"))
	var before map[string]json.RawMessage
	testproc.WaitFor(t, 30*time.Second, func() error {
		var rows []map[string]json.RawMessage
		body, err := os.ReadFile(led)
		if err == nil {
			err = json.Unmarshal(body, &rows)
		}
		if err != nil || len(rows) != 1 {
			return fmt.Errorf("no row of custody run's child yet: %v", err)
		}
		before = rows[0]
		return nil
	})
	pid := string(before["pid"])
	if r := runCLI(t, "--ledger", led, "register", "--pid", pid, "--purpose", "again"); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	var rows []map[string]json.RawMessage
	body, _ := os.ReadFile(led)
	if err := json.Unmarshal(body, &rows); err != nil || len(rows) != 1 {
		t.Fatalf("ledger after register: %s, %v", body, err)
	}
	after := rows[0]
	if string(after["purpose"]) != `"again"` {
		t.Errorf("purpose %s, want the new row's", after["purpose"])
	}
	for _, k := range []string{"pgid", "scope", "owner", "containment"} {
		if before[k] == nil || string(after[k]) != string(before[k]) {
			t.Errorf("%s: %s before, %s after the re-registration", k, before[k], after[k])
		}
	}
	run.Stdin().Close()
	run.Wait()
}
