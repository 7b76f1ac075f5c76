//go:build linux || darwin

package custody_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/supervise"
)

func init() {
	testproc.Register("gateway", helperGateway)
	testproc.Register("new-gateway", helperNewGateway)
}

// helperGateway is a gateway about to be replaced: its slot runs a watcher (a worker with a
// grandchild in its group), whose grant it writes to the file args[1] for its successor. It
// prints "watcher <pid>", "grandchild <pid>" and "supervisor <pid>", and once the test answers
// with a line on stdin hands the grant on; it waits for the transfer,
// prints "handed <generation> <receiver>", and exits 0.
func helperGateway(args []string) int {
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: &supervise.Client{Grace: time.Second}}
	slot := &custody.Slot{Owner: o, Purpose: "watcher"}
	cmd := exec.Command(os.Args[0], "-grandchild")
	cmd.Env = append(os.Environ(), "CUSTODY_TEST_HELPER=worker")
	cmd.Stdin = os.NewFile(3, "lifeline")
	out, _ := cmd.StdoutPipe()
	c, err := slot.Replace(context.Background(), cmd)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	f, _ := readyFields(bufio.NewScanner(out))
	g, gen, err := slot.Grant(custody.GrantOptions{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("watcher", c.ID.PID)
	fmt.Println("grandchild", f[3])
	fmt.Println("supervisor", o.Supervisor.PID())
	bufio.NewScanner(os.Stdin).Scan() // the test has read the lines above: go on
	tmp := args[1] + ".tmp"
	if err := os.WriteFile(tmp, []byte(g.String()), 0o600); err != nil || os.Rename(tmp, args[1]) != nil {
		fmt.Println("error", err)
		return 1
	}
	res, _ := g.Wait(context.Background())
	if res.Outcome != custody.Transferred {
		fmt.Println("error", res.Outcome, res.Reason)
		return 1
	}
	if _, err := slot.Replace(context.Background(), exec.Command("true")); err == nil {
		fmt.Println("error the slot started a generation while the handed one runs")
		return 1
	}
	fmt.Println("handed", gen, res.Receiver)
	return 0
}

// helperNewGateway is the successor: it waits for the grant file args[1], adopts the watcher
// into its own slot, prints "adopted <pid> <generation>", and blocks until killed.
func helperNewGateway(args []string) int {
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: &supervise.Client{Grace: time.Second}}
	slot := &custody.Slot{Owner: o, Purpose: "watcher"}
	var grant []byte
	err := testproc.Poll(context.Background(), time.Minute, func() (err error) {
		grant, err = os.ReadFile(args[1])
		return err
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	c, err := slot.Adopt(context.Background(), string(grant))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	_, gen := slot.Current()
	fmt.Println("adopted", c.ID.PID, gen)
	select {}
}

// TestGatewayWitness: a gateway hands its watcher to its successor through a grant and exits;
// the watcher outlives it, and dies with the successor.
func TestGatewayWitness(t *testing.T) {
	env := newTransferEnv(t, false)
	handoff := filepath.Join(t.TempDir(), "grant")
	t.Cleanup(func() { // a gateway killed by the cleanup cannot remove its socket directory
		if b, err := os.ReadFile(handoff); err == nil {
			if tok, err := custody.ParseGrant(string(b)); err == nil {
				os.RemoveAll(filepath.Dir(tok.Sock))
			}
		}
	})
	cmd := env.command(t, "gateway", env.ledger, handoff)
	cmd.ExtraFiles = []*os.File{lifeline(t)}
	old := testproc.Start(t, cmd)
	watcher := pidIncarnation(t, old.Expect("watcher ", 30*time.Second)[0])
	grandchild := pidIncarnation(t, old.Expect("grandchild ", 10*time.Second)[0])
	supervisor := pidIncarnation(t, old.Expect("supervisor ", 10*time.Second)[0])
	successor := testproc.Start(t, env.command(t, "new-gateway", env.ledger, handoff))
	if _, err := old.Stdin().Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if f := successor.Expect("adopted ", 30*time.Second); f[0] != strconv.Itoa(watcher.PID) || f[1] != "1" {
		t.Fatalf("successor adopted %v, want pid %d generation 1", f, watcher.PID)
	}
	if f := old.Expect("handed ", 10*time.Second); f[1] != strconv.Itoa(successor.Process.Pid) {
		t.Fatalf("old gateway handed to %v, want %d", f, successor.Process.Pid)
	}
	if err := old.Wait(); err != nil {
		t.Fatalf("old gateway: %v", err)
	}
	waitGone(t, "the old gateway's supervisor", supervisor)
	mustAlive(t, "after the old gateway's exit, the watcher", watcher, grandchild)
	if owner := ownerOf(t, env.ledger, watcher.PID); owner != successor.Process.Pid {
		t.Fatalf("watcher's owner %d, want the successor %d", owner, successor.Process.Pid)
	}
	killAndWait(t, successor)
	waitGone(t, "after the successor's death, the watcher", watcher, grandchild)
}
