package interop_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/tag"
)

// started maps the pids of the test's cats to their handles.
var started sync.Map

// cats starts n processes that live until the test ends (or stopCat), for rows to name.
func cats(t *testing.T, n int) []int {
	pids := make([]int, n)
	for i := range pids {
		p := testproc.Start(t, exec.Command("cat"))
		pids[i] = p.Process.Pid
		started.Store(pids[i], p)
	}
	return pids
}

// hermesPIDs returns the pids of Hermes's ledger_entries (all installs, unknown kept).
func (h *hermes) hermesPIDs() map[int]bool {
	h.t.Helper()
	var pids []int
	if err := json.Unmarshal([]byte(h.run(`print(json.dumps([e["pid"] for e in pi.ledger_entries(all_installs=True)]))`)), &pids); err != nil {
		h.t.Fatal(err)
	}
	out := map[int]bool{}
	for _, p := range pids {
		out[p] = true
	}
	return out
}

// custodyPIDs returns the pids `custody ps --json` lists for Hermes's install.
func (h *hermes) custodyPIDs() map[int]bool {
	h.t.Helper()
	var rows []struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(h.custody("ps", "--json")), &rows); err != nil {
		h.t.Fatal(err)
	}
	out := map[int]bool{}
	for _, r := range rows {
		out[r.PID] = true
	}
	return out
}

// TestLedgerBothWays: each program reads the rows the other wrote (custody within Hermes's install
// filter, so the install ids agree), rewrites the file keeping the other's rows byte for byte, and
// prunes the other's rows once their processes are gone.
func TestLedgerBothWays(t *testing.T) {
	h := newHermes(t)
	pids := cats(t, 4)
	hermesOwn, custodyOwn := pids[:2], pids[2:]
	h.run(`
for p in sys.argv[1:]:
    assert pi.register_child(int(p), "mcp-helper"), p
`, strconv.Itoa(hermesOwn[0]), strconv.Itoa(hermesOwn[1]))
	before := h.rows()
	for _, p := range custodyOwn {
		h.custody("register", "--pid", strconv.Itoa(p), "--purpose", "serve")
	}
	after := h.rows()
	for _, p := range hermesOwn {
		if string(mustJSON(t, after[p])) != string(mustJSON(t, before[p])) {
			t.Errorf("custody's rewrite changed Hermes's row %d:\n%s\n%s", p, before[p], after[p])
		}
	}
	seen := h.custodyPIDs()
	for _, p := range pids {
		if !seen[p] {
			t.Errorf("custody ps does not list %d (rows %v)", p, seen)
		}
	}
	hseen := h.hermesPIDs()
	for _, p := range pids {
		if !hseen[p] {
			t.Errorf("Hermes's ledger_entries does not list %d (rows %v)", p, hseen)
		}
	}
	// Hermes's rewrite keeps every field custody wrote.
	h.run(`assert pi.register_child(int(sys.argv[1]), "mcp-helper")`, strconv.Itoa(cats(t, 1)[0]))
	again := h.rows()
	for _, p := range custodyOwn {
		for k, v := range after[p] {
			if string(again[p][k]) != string(v) {
				t.Errorf("Hermes's rewrite changed custody's row %d field %s: %s → %s", p, k, v, again[p][k])
			}
		}
	}

	// Each prunes the other's dead rows: end one row of each, then let each side write.
	stopCat(t, hermesOwn[0])
	stopCat(t, custodyOwn[0])
	h.run(`assert pi.register_child(int(sys.argv[1]), "mcp-helper")`, strconv.Itoa(cats(t, 1)[0]))
	if rows := h.rows(); rows[custodyOwn[0]] != nil {
		t.Errorf("Hermes's write kept custody's dead row %d", custodyOwn[0])
	}
	h.custody("register", "--pid", strconv.Itoa(cats(t, 1)[0]))
	if rows := h.rows(); rows[hermesOwn[0]] != nil {
		t.Errorf("custody's write kept Hermes's dead row %d", hermesOwn[0])
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stopCat ends one of the test's cats, by closing its input, and waits for it.
func stopCat(t *testing.T, pid int) {
	t.Helper()
	v, ok := started.Load(pid)
	if !ok {
		t.Fatalf("%d is not a cat of this test", pid)
	}
	p := v.(*testproc.Proc)
	p.Stdin().Close()
	p.Wait()
}

// TestConcurrentWriters: Hermes processes and custody writers register at once, and no row is
// lost; and a custody write prepared while Hermes gives up waiting for the lock (it writes
// without it after 2 s) keeps Hermes's row.
func TestConcurrentWriters(t *testing.T) {
	h := newHermes(t)
	const perSide = 12
	pids := cats(t, 2*perSide)
	l := ledger.Open(h.ledger())
	defer l.Close()
	var wg sync.WaitGroup
	for w := range 3 { // three Hermes processes
		var args []string
		for i := w; i < perSide; i += 3 {
			args = append(args, strconv.Itoa(pids[i]))
		}
		wg.Go(func() {
			h.run(`
for p in sys.argv[1:]:
    assert pi.register_child(int(p), "mcp-helper"), p
`, args...)
		})
	}
	for _, pid := range pids[perSide:] { // custody writers, one goroutine each
		wg.Go(func() {
			inc, err := procid.Read(pid)
			if err != nil {
				t.Error(err)
				return
			}
			row := ledger.NewRow(inc, procid.Incarnation{})
			row.Purpose = "serve"
			if _, err := l.Add(context.Background(), row); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	rows := h.rows()
	for _, p := range pids {
		if rows[p] == nil {
			t.Errorf("row of %d lost", p)
		}
	}

	// custody holds the lock, prepared, past Hermes's 2 s wait: Hermes writes without it.
	tx, err := l.LockAppend(context.Background())
	if err == nil {
		err = tx.PrepareAppend()
	}
	if err != nil {
		t.Fatal(err)
	}
	late := cats(t, 2)
	h.run(`assert pi.register_child(int(sys.argv[1]), "mcp-helper")`, strconv.Itoa(late[0]))
	inc, err := procid.Read(late[1])
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tx.Append(ledger.NewRow(inc, procid.Incarnation{}))
	if err != nil {
		t.Fatal(err)
	}
	rows = h.rows()
	if rows[late[0]] == nil || rows[late[1]] == nil || rep.Merged == 0 {
		t.Errorf("after Hermes wrote without the lock: Hermes's row kept %v, custody's %v, merged %d",
			rows[late[0]] != nil, rows[late[1]] != nil, rep.Merged)
	}
	for _, p := range pids {
		if rows[p] == nil {
			t.Errorf("row of %d lost", p)
		}
	}
}

// TestTagBothWays: the tag custody stamps parses in Hermes with Hermes's own install id, and
// Hermes's parses in custody; and both compute one install id for the same root, through a
// symbolic link and with a letter whose lower case differs between Go and Python.
func TestTagBothWays(t *testing.T) {
	h := newHermes(t)
	out := h.custody("run", "--purpose", "gateway", "--", python, "-c", prelude+`
t = pi.parse_spawn_tag(os.environ.get(pi.SPAWN_ENV_VAR))
print(json.dumps({"install": t.install, "purpose": t.purpose, "pid": t.spawner_pid, "mine": pi.install_id()}))
`)
	var got struct {
		Install, Purpose, Mine string
		PID                    int
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if got.Install != got.Mine || got.Purpose != "gateway" || got.PID <= 0 {
		t.Errorf("custody's tag in Hermes: %+v; want Hermes's own install id and purpose gateway", got)
	}

	raw := strings.TrimSpace(h.run(`print(pi.build_spawn_tag("mcp-helper"))`))
	tg, err := tag.Parse(raw)
	if err != nil || tg.Purpose != "mcp-helper" || tg.Install != tag.Install(h.project) || tg.SpawnerCreate == nil {
		t.Errorf("Hermes's tag %q in custody: %+v, %v; want install %s", raw, tg, err, tag.Install(h.project))
	}

	dir := testproc.TempDir(t)
	roots := []string{dir + "/İstanbul/Σοφία", dir + "/link/../İstanbul", dir + "/missing/ΑΣ"}
	mustRun(t, "mkdir", "-p", dir+"/İstanbul/Σοφία", dir+"/real/sub")
	mustRun(t, "ln", "-s", "real/sub", dir+"/link")
	var args []string
	args = append(args, roots...)
	var ids []string
	if err := json.Unmarshal([]byte(h.run(`print(json.dumps([pi.install_id(Path(r)) for r in sys.argv[1:]]))`, args...)), &ids); err != nil {
		t.Fatal(err)
	}
	for i, r := range roots {
		if got := tag.Install(r); got != ids[i] {
			t.Errorf("install id of %s: custody %s, Hermes %s", r, got, ids[i])
		}
	}
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}
