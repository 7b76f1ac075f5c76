package interop_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/cli"
	"github.com/custody-dev/custody/internal/testproc"
)

func TestMain(m *testing.M) {
	custody.Init() // custody run's supervisor is this binary, re-executed
	// The custody command line, run by the tests and by Hermes as its supervisor.
	testproc.Register("custody", func([]string) int { return cli.Main() })
	testproc.Main(m)
}

// python is the interpreter the peer runs on: Debian's, which has psutil (see the peer's
// ensure-deps); a python3 earlier on PATH may lack it.
const python = "/usr/bin/python3"

// hermes is one Hermes installation: its home (the ledger's directory) and its project root
// (whose hash is its install id), both fresh for the test.
type hermes struct {
	t             *testing.T
	dir           string // the peer: $CUSTODY_PEER
	home, project string
}

// newHermes returns a Hermes installation for the test, or skips it (fails under
// CUSTODY_REQUIRE_PRIVILEGED=1) when $CUSTODY_PEER names no peer.
func newHermes(t *testing.T) *hermes {
	t.Helper()
	dir := os.Getenv("CUSTODY_PEER")
	if dir == "" {
		testproc.Skip(t, "CUSTODY_PEER does not name the Hermes peer (run its ensure-deps, then export CUSTODY_PEER=<peer dir>)")
	}
	if _, err := os.Stat(filepath.Join(dir, "py", "hermes_cli", "process_identity.py")); err != nil {
		t.Fatalf("CUSTODY_PEER=%s: not the peer: %v", dir, err)
	}
	if out, err := exec.Command(python, "-c", "import psutil").CombinedOutput(); err != nil {
		testproc.Skip(t, "%s cannot import psutil (run the peer's ensure-deps): %v: %s", python, err, out)
	}
	return &hermes{t: t, dir: dir, home: testproc.TempDir(t), project: testproc.TempDir(t)}
}

func (h *hermes) ledger() string { return filepath.Join(h.home, "spawn-ledger.json") }

// prelude imports what every script uses.
const prelude = `import json, os, subprocess, sys, time
from pathlib import Path
import hermes_cli.process_identity as pi
`

// cmd returns a Python command running script with the peer's module importable.
func (h *hermes) cmd(script string, args ...string) *exec.Cmd {
	cmd := testproc.Command(h.t, python, append([]string{"-c", prelude + script}, args...)...)
	cmd.Env = append(os.Environ(), h.env()...)
	return cmd
}

// env is what the peer's module needs in its environment.
func (h *hermes) env() []string {
	return []string{"PYTHONPATH=" + filepath.Join(h.dir, "py"), "PEER_HOME=" + h.home,
		"PEER_PROJECT_ROOT=" + h.project, "PYTHONDONTWRITEBYTECODE=1"}
}

// run runs script to its end and returns its standard output, failing the test on an error.
func (h *hermes) run(script string, args ...string) string {
	h.t.Helper()
	cmd := h.cmd(script, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		h.t.Fatalf("hermes: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// custody runs the custody command line with Hermes's files (--hermes-home, and the project root
// as install root) and returns its standard output, failing the test unless it exits 0.
func (h *hermes) custody(args ...string) string {
	h.t.Helper()
	out, code, stderr := h.custodyExit(args...)
	if code != 0 {
		h.t.Fatalf("custody %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	return out
}

func (h *hermes) custodyExit(args ...string) (stdout string, code int, stderr string) {
	h.t.Helper()
	cmd := testproc.Helper(h.t, "custody", append([]string{"--hermes-home", h.home, "--install-root", h.project}, args...)...)
	cmd.Env = append(cmd.Env, h.env()...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode(), errb.String()
	} else if err != nil {
		h.t.Fatal(err)
	}
	return out.String(), 0, errb.String()
}

// rows reads the ledger file as JSON objects, keyed by pid.
func (h *hermes) rows() map[int]map[string]json.RawMessage {
	h.t.Helper()
	body, err := os.ReadFile(h.ledger())
	if err != nil {
		h.t.Fatal(err)
	}
	var list []map[string]json.RawMessage
	// Python writes NaN where a float is not a number; encoding/json reads none, and the tests
	// write none.
	if err := json.Unmarshal(body, &list); err != nil {
		h.t.Fatalf("ledger: %v\n%s", err, body)
	}
	out := map[int]map[string]json.RawMessage{}
	for _, r := range list {
		var pid int
		json.Unmarshal(r["pid"], &pid)
		out[pid] = r
	}
	return out
}
