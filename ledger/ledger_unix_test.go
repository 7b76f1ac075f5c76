//go:build unix

package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// cats starts n `cat` processes that live until the test ends.
func cats(t *testing.T, n int) []int {
	var pids []int
	for range n {
		p := testproc.Start(t, exec.Command("cat"))
		pids = append(pids, p.Process.Pid)
	}
	return pids
}

func pidsOf(rows []ledger.Row) []int {
	var out []int
	for _, r := range rows {
		out = append(out, r.PID)
	}
	slices.Sort(out)
	return out
}

// TestNoLostRows: eight processes register 100 live processes each at once; every row lands and a
// reader polling throughout never sees a file that fails to parse.
func TestNoLostRows(t *testing.T) {
	l := tempLedger(t)
	const writers, each = 8, 100
	reader := testproc.Start(t, testproc.Helper(t, "read-loop", l.Path()))
	var procs []*testproc.Proc
	for range writers {
		procs = append(procs, testproc.Start(t, testproc.Helper(t, "register-many", l.Path(), strconv.Itoa(each))))
	}
	var want []int
	for _, p := range procs {
		for range each {
			f := p.Expect("pid ", time.Minute)
			want = append(want, atoi(f[0]))
		}
		p.Expect("done", time.Minute)
	}
	reader.Stdin().Close()
	f := reader.Expect("reads ", 10*time.Second)
	if f[2] != "0" {
		t.Errorf("reader saw %s unparsable files in %s reads: %s", f[2], f[0], strings.Join(f[3:], " "))
	}
	if f[0] == "0" {
		t.Errorf("reader made no read")
	}
	rows, err := l.Rows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, pidsOf(rows)); diff != "" {
		t.Errorf("ledger rows (-want +got):\n%s", diff)
	}
}

// TestCrashSafety SIGKILLs a writer at a random point of its write loop, 50 times: the file always
// parses and holds, for every PID, a row at least as new as the last write that returned.
func TestCrashSafety(t *testing.T) {
	l := tempLedger(t)
	pool := cats(t, 8)
	args := []string{l.Path()}
	for _, p := range pool {
		args = append(args, strconv.Itoa(p))
	}
	for trial := range 50 {
		w := testproc.Start(t, testproc.Helper(t, "write-loop", args...))
		committed := map[int]float64{}
		for range 1 + rand.IntN(30) {
			f := w.Expect("ok ", 30*time.Second)
			committed[atoi(f[0])] = float64(atoi(f[1]))
		}
		w.Process.Signal(syscall.SIGKILL)
		w.Wait()
		rows, err := ledger.Peek(l.Path())
		if err != nil {
			t.Fatalf("trial %d: ledger does not parse after SIGKILL: %v", trial, err)
		}
		got := map[int]float64{}
		for _, r := range rows {
			got[r.PID] = r.RegisteredAt
		}
		for pid, seq := range committed {
			if got[pid] < seq {
				t.Fatalf("trial %d: pid %d: row with seq %v in the file, committed %v before the kill", trial, pid, got[pid], seq)
			}
		}
	}
	// A writer killed mid-write leaves its temporary file; the next write removes it.
	if err := register(l, pool[0], "serve"); err != nil {
		t.Fatal(err)
	}
	if tmps, _ := filepath.Glob(l.Path() + ".tmp-*"); len(tmps) > 0 {
		t.Errorf("temporary files left after a write: %v", tmps)
	}
}

// TestWriteQuarantines: a write that finds a corrupt file reports the quarantine.
func TestWriteQuarantines(t *testing.T) {
	l := tempLedger(t)
	os.MkdirAll(filepath.Dir(l.Path()), 0o700)
	os.WriteFile(l.Path(), []byte(`[{"pid": 1, "crea`), 0o600) // truncated: what a power loss without fsync can leave
	pool := cats(t, 1)
	inc, _ := procid.Read(pool[0])
	rep, err := l.Add(context.Background(), ledger.NewRow(inc, procid.Incarnation{}))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Quarantined == nil {
		t.Errorf("report %+v: want the truncated file quarantined", rep)
	}
}

// TestSharedFields: a row written by another program keeps every field and value through a
// custody rewrite, and custody reads it without its own fields.
func TestSharedFields(t *testing.T) {
	l := tempLedger(t)
	self, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	foreign := fmt.Sprintf(`{"pid": %d, "create_time": %.3f, "purpose": "dashboard", "install": "abcdef012345",
  "spawner_pid": null, "spawner_create": null, "registered_at": 1764428401.25, "argv": "python -m hermes dashboard",
  "host": "127.0.0.1", "port": 9119, "profile": "work", "hermes_home": "/home/u/.hermes", "isolated": true,
  "boot_start": null, "spawner_boot": null, "boot_id": null,
  "future_field": {"nested": [1, 2.50, "ü"], "big": 12345678901234567890}, "flag": false}`, self.PID, self.CreateTime)
	os.MkdirAll(filepath.Dir(l.Path()), 0o700)
	if err := os.WriteFile(l.Path(), []byte("[\n"+foreign+"\n]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := cats(t, 1)
	if err := register(l, pool[0], "serve"); err != nil {
		t.Fatal(err)
	}
	rows, err := l.Rows(context.Background())
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows = %v, %v; want the foreign row and the new one", pidsOf(rows), err)
	}
	raw, _ := rows[0].Raw()
	if diff := cmp.Diff(decode(t, []byte(foreign)), decode(t, raw)); diff != "" {
		t.Errorf("foreign row changed by the rewrite (-want +got):\n%s", diff)
	}
	r := rows[0]
	if r.StartTicks != nil || r.Reapable != nil || r.Purpose != "dashboard" || *r.Port != 9119 || !r.Isolated {
		t.Errorf("foreign row read as %+v", r)
	}
	if s, p := r.Record().Check(true); s != procid.Alive || p != procid.EpochProof {
		t.Errorf("foreign row of this process: %v, %v; want alive by epoch", s, p)
	}
	// Set changes one field and keeps the rest.
	if err := r.Set("generation", 2); err != nil {
		t.Fatal(err)
	}
	raw, _ = r.Raw()
	want := decode(t, []byte(foreign))
	want["generation"] = json.Number("2")
	if diff := cmp.Diff(want, decode(t, raw)); diff != "" || *r.Generation != 2 {
		t.Errorf("after Set (-want +got):\n%s", diff)
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

// TestStalledLockHolder: a lock holder stopped with SIGSTOP makes a writer give up after its
// bounded wait, with an error naming the stopped holder, and write nothing.
func TestStalledLockHolder(t *testing.T) {
	l := tempLedger(t)
	pool := cats(t, 2)
	if err := register(l, pool[0], "serve"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(l.Path())
	holder := testproc.Start(t, testproc.Helper(t, "hold-lock", l.Path()))
	holder.Expect("locked", 10*time.Second)
	if err := holder.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Signal(syscall.SIGCONT) })
	l.LockTimeout = 300 * time.Millisecond
	inc, _ := procid.Read(pool[1])
	start := time.Now()
	_, err := l.Add(context.Background(), ledger.NewRow(inc, procid.Incarnation{}))
	waited := time.Since(start)
	le, ok := errors.AsType[*ledger.LockedError](err)
	if !ok {
		t.Fatalf("Add with a stopped lock holder = %v; want a *LockedError", err)
	}
	if le.Holder != holder.Process.Pid || !le.Stopped {
		t.Errorf("LockedError names holder %d stopped=%v; want %d stopped", le.Holder, le.Stopped, holder.Process.Pid)
	}
	if !strings.Contains(err.Error(), "(stopped)") || !strings.Contains(err.Error(), "nothing written") {
		t.Errorf("error %q does not say what happened", err)
	}
	if waited > 10*time.Second { // the wait is 300 ms; this bound only catches a writer that blocks
		t.Errorf("writer blocked for %v with a 300 ms lock timeout", waited)
	}
	if after, _ := os.ReadFile(l.Path()); !bytes.Equal(before, after) {
		t.Errorf("ledger changed although the lock was not taken")
	}
	holder.Process.Signal(syscall.SIGCONT)
	holder.Stdin().Close()
	holder.Wait()
	l.LockTimeout = 0
	if _, err := l.Add(context.Background(), ledger.NewRow(inc, procid.Incarnation{})); err != nil {
		t.Errorf("Add after the holder released: %v", err)
	}
}

// TestPermissions: the directory is 0700 and the file 0600 whatever the umask.
func TestPermissions(t *testing.T) {
	pool := cats(t, 1)
	for _, mask := range []int{0, 0o022, 0o277} {
		l := tempLedger(t) // its parent is made under the test's umask, writable by a non-root user
		old := syscall.Umask(mask)
		err := register(l, pool[0], "serve")
		syscall.Umask(old)
		if err != nil {
			t.Fatalf("umask %03o: %v", mask, err)
		}
		for path, want := range map[string]os.FileMode{filepath.Dir(l.Path()): 0o700, l.Path(): 0o600} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("umask %03o: %s has mode %v, want %v", mask, path, got, want)
			}
		}
	}
}

// TestPrune: rows of dead processes go at the next write, unknown-provable rows stay, and a row
// for the PID being written is replaced.
func TestPrune(t *testing.T) {
	l := tempLedger(t)
	ctx := context.Background()
	pool := cats(t, 2)
	dead := testproc.Start(t, exec.Command("cat"))
	for _, pid := range []int{pool[0], dead.Process.Pid} {
		if err := register(l, pid, "serve"); err != nil {
			t.Fatal(err)
		}
	}
	dead.Stdin().Close()
	dead.Wait()
	other := "another-boot"
	if _, err := l.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) {
		return append(rows, ledger.Row{PID: pool[1], BootID: &other}), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := register(l, pool[0], "gateway"); err != nil {
		t.Fatal(err)
	}
	rows, err := l.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].PID != pool[0] || rows[0].Purpose != "gateway" {
		t.Errorf("rows after prune = %+v; want only pid %d as gateway", rows, pool[0])
	}
}

// TestBeginAppendPrunesByBootOnly: the append an owner prepares while its child execs drops rows
// of another boot but probes no PID, so a dead row survives it; the next ordinary write drops it.
func TestBeginAppendPrunesByBootOnly(t *testing.T) {
	l := tempLedger(t)
	ctx := context.Background()
	pool := cats(t, 2)
	other := "another-boot"
	if _, err := l.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) {
		return append(rows, ledger.Row{PID: pool[1], BootID: &other}), nil
	}); err != nil {
		t.Fatal(err)
	}
	dead := testproc.Start(t, exec.Command("cat"))
	if err := register(l, dead.Process.Pid, "serve"); err != nil { // prunes the other boot's row
		t.Fatal(err)
	}
	if _, err := l.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) {
		return append(rows, ledger.Row{PID: pool[1], BootID: &other}), nil
	}); err != nil {
		t.Fatal(err)
	}
	dead.Stdin().Close()
	dead.Wait()

	tx, err := ledger.BeginAppend(l, ctx)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := procid.Read(pool[0])
	if err != nil {
		t.Fatal(err)
	}
	self, _ := procid.Self()
	rep, err := tx.Append(ledger.NewChildRow(inc, self, []string{"cat"}))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := l.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pidsOf(rows), sortedPIDs(pool[0], dead.Process.Pid); !slices.Equal(got, want) || rep.Pruned != 1 {
		t.Fatalf("after BeginAppend: pids %v, pruned %d; want %v, pruned 1 (the other boot's row)", got, rep.Pruned, want)
	}

	if err := register(l, pool[0], "gateway"); err != nil {
		t.Fatal(err)
	}
	if rows, err = l.Rows(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pidsOf(rows); !slices.Equal(got, []int{pool[0]}) {
		t.Errorf("after an ordinary write: pids %v; want only %d", got, pool[0])
	}
}

func sortedPIDs(pids ...int) []int {
	slices.Sort(pids)
	return pids
}

// TestWritesKeepNoDescriptors: a writer holds the replaced file open until its rename is done
// and closes it afterwards, off its path; a hundred writes later none of those descriptors is
// left open.
func TestWritesKeepNoDescriptors(t *testing.T) {
	l := tempLedger(t)
	pool := cats(t, 1)
	open := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			ents, err = os.ReadDir("/dev/fd") // macOS
		}
		if err != nil {
			testproc.Skip(t, "no list of open descriptors: %v", err)
		}
		return len(ents)
	}
	if err := register(l, pool[0], "serve"); err != nil {
		t.Fatal(err)
	}
	before := open()
	for range 100 {
		if err := register(l, pool[0], "serve"); err != nil {
			t.Fatal(err)
		}
	}
	testproc.WaitFor(t, 5*time.Second, func() error {
		if now := open(); now > before {
			return fmt.Errorf("descriptors open: %d before 100 writes, %d after", before, now)
		}
		return nil
	})
}

// TestHandleSeesOtherWriters: a handle starts its next write from the rows it wrote last only
// while the ledger is still its file. Another handle's write (a rename: a new file) and a foreign
// program's edit in place (same file, new size) both make it read the file again, so no row is
// lost; an aborted write leaves the handle able to write.
func TestHandleSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	pool := cats(t, 5)
	a := tempLedger(t)
	b := ledger.Open(a.Path())
	defer a.Close()
	defer b.Close()
	// expect reads the ledger through the other handle and checks which PIDs it holds.
	expect := func(when string, pids ...int) []ledger.Row {
		t.Helper()
		rows, err := b.Rows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pidsOf(rows), sortedPIDs(pids...); !slices.Equal(got, want) {
			t.Fatalf("after %s: pids %v, want %v", when, got, want)
		}
		return rows
	}
	for i, l := range []*ledger.Ledger{a, b, a} {
		if err := register(l, pool[i], "serve"); err != nil {
			t.Fatal(err)
		}
	}
	expect("writes by two handles", pool[0], pool[1], pool[2])
	tx, err := ledger.Begin(a, ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Abort()
	if err := register(a, pool[3], "serve"); err != nil {
		t.Fatal(err)
	}
	rows := expect("an aborted write and a write", pool[0], pool[1], pool[2], pool[3])

	// A foreign editor rewrites the file in place, keeping only pool[1]'s row.
	var kept []byte
	for _, r := range rows {
		if r.PID == pool[1] {
			if kept, err = json.Marshal(r.Decoded()); err != nil {
				t.Fatal(err)
			}
		}
	}
	f, err := os.OpenFile(a.Path(), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(append([]byte("[\n"), kept...), "\n]\n"...)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := register(a, pool[4], "serve"); err != nil {
		t.Fatal(err)
	}
	expect("an edit in place and a write", pool[1], pool[4])
}
