package interop_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
)

// hermesReaps is what Hermes's two sweeps would reap now: its mcp-helper sweep, and its backend
// owner rung for each serve, dashboard and gateway row of the install. Nothing is killed: the
// sweeps report through kill_fn.
const hermesReaps = `
reaped = []
pi.reap_orphaned_mcp_helpers(kill_fn=reaped.append)
for e in pi.ledger_entries():
    if e.get("purpose") in ("serve", "dashboard", "gateway"):
        pi.reap_orphaned_backend_owner(e["pid"], e.get("create_time"), kill_fn=reaped.append)
print(json.dumps(sorted(set(reaped))))
`

// selfRegistered is a process that registers itself with Hermes (no spawn tag, no spawner) and
// waits on its input.
const selfRegistered = `
assert pi.register_self(sys.argv[1])
print("ready", os.getpid(), flush=True)
sys.stdin.read()
`

// TestReapDecisionsMatch: for the same rows, custody reaps exactly what Hermes's sweeps reap:
// reapable purposes whose spawner was recorded and is dead; never a row whose spawner lives, a
// purpose Hermes does not sweep, or a row without a recorded spawner.
func TestReapDecisionsMatch(t *testing.T) {
	h := newHermes(t)
	pids := cats(t, 4)
	orphanHelper, orphanServe, orphanChat, keptHelper := pids[0], pids[1], pids[2], pids[3]
	// A Hermes process registers three children and exits: their spawner is dead.
	h.run(`
for p, purpose in zip(sys.argv[1::2], sys.argv[2::2]):
    assert pi.register_child(int(p), purpose)
`, strconv.Itoa(orphanHelper), "mcp-helper", strconv.Itoa(orphanServe), "serve", strconv.Itoa(orphanChat), "chat")
	// One that stays registers the fourth: its spawner lives.
	spawner := testproc.Start(t, h.cmd(`
assert pi.register_child(int(sys.argv[1]), "mcp-helper")
print("ready", flush=True)
sys.stdin.read()
`, strconv.Itoa(keptHelper)))
	spawner.Expect("ready", 30*time.Second)
	// Two register themselves, with no spawner recorded.
	var unspawned []int
	for _, purpose := range []string{"mcp-helper", "serve"} {
		p := testproc.Start(t, h.cmd(selfRegistered, purpose))
		pid, _ := strconv.Atoi(p.Expect("ready", 30*time.Second)[0])
		unspawned = append(unspawned, pid)
	}

	var hermes []int
	if err := json.Unmarshal([]byte(h.run(hermesReaps)), &hermes); err != nil {
		t.Fatal(err)
	}
	var decisions []struct {
		PID    int    `json:"pid"`
		Action string `json:"action"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(h.custody("reap", "--dry-run", "--json")), &decisions); err != nil {
		t.Fatal(err)
	}
	reasons := map[int]string{}
	var custody []int
	for _, d := range decisions {
		reasons[d.PID] = d.Action + " " + d.Reason
		if d.Action == "reap" {
			custody = append(custody, d.PID)
		}
	}
	slices.Sort(custody)
	want := []int{orphanHelper, orphanServe}
	slices.Sort(want)
	if !slices.Equal(hermes, want) {
		t.Errorf("Hermes reaps %v, want %v: the test's rows are not what it thinks", hermes, want)
	}
	if !slices.Equal(custody, hermes) {
		t.Errorf("custody reaps %v, Hermes %v; custody's reasons: %v", custody, hermes, reasons)
	}
	for _, pid := range append(unspawned, keptHelper, orphanChat) {
		if _, ok := reasons[pid]; !ok {
			t.Errorf("custody made no decision on %d (decisions for %v)", pid, slices.Collect(maps.Keys(reasons)))
		}
	}
}
