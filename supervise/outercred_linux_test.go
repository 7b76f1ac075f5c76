package supervise_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/localsock"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
)

func init() { testproc.Register("nest-impostor", helperNestImpostor) }

// helperNestImpostor listens on the socket args[0] names, prints "ready", and answers "ok" to
// every line of every connection, as a supervisor that covers all it is asked to would, until
// its stdin (its lifeline) closes.
func helperNestImpostor(args []string) int {
	ln, err := net.Listen("unix", args[0])
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for sc := bufio.NewScanner(c); sc.Scan(); {
					fmt.Fprintln(c, "ok")
				}
			}()
		}
	}()
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

// A nested owner covers its groups only with an outer supervisor of its own user: a socket of
// another user's at the path its environment names (the outer owner's directory swept, and the
// name taken since) is refused before anything is sent, though it would answer "ok".
func TestOuterOfAnotherUserRefused(t *testing.T) {
	testproc.RequireRoot(t)
	const nobody = 65534
	// The test binary lives in go's 0700 work directory: copy it where nobody can run it.
	dir, err := os.MkdirTemp("", "custody-impostor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	copyExe, nest := filepath.Join(dir, "supervise.test"), filepath.Join(dir, "nest")
	if err := errors.Join(os.Chmod(dir, 0o755), os.WriteFile(copyExe, b, 0o755), os.Mkdir(nest, 0o700), os.Chown(nest, nobody, nobody)); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(nest, "s")
	imp := startProcess(t, "nest-impostor", copyExe, []string{sock}, helperOpts{stdout: true,
		env: []string{testproc.Env("nest-impostor")}, cred: &syscall.Credential{Uid: nobody, Gid: nobody}})
	if l := imp.line(20 * time.Second); l != "ready" {
		t.Fatalf("nest-impostor: %q", l)
	}
	me, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	g := supervise.Group{PGID: me.PID, PID: me.PID, Start: me.Start}
	out := &supervise.Outer{Path: sock}
	err = out.Register(g)
	if !errors.Is(err, localsock.ErrForeignPeer) {
		t.Fatalf("register with uid %d's listener: %v, want %v", nobody, err, localsock.ErrForeignPeer)
	}
	if err := out.Unregister(g.PGID); err != nil {
		t.Errorf("unregister of a group never registered: %v", err)
	}
}
