package interop_test

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
)

// TestRegisterKeepsHermesDetails: custody register of a process Hermes registered with details
// (register_self's host, port, profile, its hermes_home, isolated) writes what it knows and keeps
// the rest: it never writes its empty defaults over Hermes's values.
func TestRegisterKeepsHermesDetails(t *testing.T) {
	h := newHermes(t)
	cmd := h.cmd(`
assert pi.register_self("serve", detail={"host": "127.0.0.1", "port": 8642, "profile": "work", "isolated": True})
print(os.getpid(), flush=True)
sys.stdin.read()
`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("Hermes's process said nothing: %v", sc.Err())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
	if err != nil {
		t.Fatal(err)
	}
	before := h.rows()[pid]
	if before == nil {
		t.Fatalf("Hermes did not register %d", pid)
	}
	h.custody("register", "--pid", strconv.Itoa(pid), "--purpose", "serve")
	after := h.rows()[pid]
	for _, k := range []string{"host", "port", "profile", "hermes_home", "isolated"} {
		if string(after[k]) != string(before[k]) {
			t.Errorf("custody register replaced Hermes's %s: %s → %s", k, before[k], after[k])
		}
	}
	if after["start_ticks"] == nil {
		t.Errorf("custody register did not write what it knows (start_ticks): %v", after)
	}
}
