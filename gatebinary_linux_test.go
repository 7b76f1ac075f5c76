package custody_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/scope"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.Register("gate-owner", helperGateOwner) }

// helperGateOwner says "ready", waits for a line on stdin, then starts `touch args[1]` gated
// (the process-group path) into the ledger args[0], and prints "exit <status>" once it ended.
func helperGateOwner(args []string) int {
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: &supervise.Client{}}
	defer o.Close()
	fmt.Println("ready")
	if !bufio.NewScanner(os.Stdin).Scan() {
		return 1
	}
	c, err := o.Start(context.Background(), exec.Command("touch", args[1]), custody.StartOptions{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	err = c.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		fmt.Println("exit 0")
	case errors.As(err, &exit):
		fmt.Println("exit", exit.ExitCode())
	default:
		fmt.Println("error", err)
	}
	return 0
}

// A gated child's gate is the owner's running binary, not the file now at its path: an owner
// whose binary was replaced while it ran (a package upgrade) still runs the program asked for.
// Were the path exec'd, the child would run the new file (here /bin/true) instead.
func TestGateIsTheRunningBinary(t *testing.T) {
	dir := testproc.TempDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "owner")
	copyFile(t, exe, bin)
	mark := filepath.Join(dir, "ran")
	cmd := testproc.Command(t, bin, filepath.Join(dir, "spawn-ledger.json"), mark)
	cmd.Env = append(os.Environ(), testproc.Env("gate-owner"), scope.EnvContainment+"=process-group")
	p := testproc.Start(t, cmd)
	p.Expect("ready", testproc.Timeout(t))
	// The upgrade: another file renamed over the binary's path, as package managers do.
	other := filepath.Join(dir, "other")
	copyFile(t, "/bin/true", other)
	if err := os.Rename(other, bin); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(p.Stdin(), "go")
	if got := p.Expect("exit ", testproc.Timeout(t)); len(got) != 1 || got[0] != "0" {
		t.Fatalf("the child exited %v, want 0", got)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the program asked for did not run: %v", err)
	}
	p.Stdin().Close()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
}
