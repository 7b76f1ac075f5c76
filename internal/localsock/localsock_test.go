//go:build linux || darwin

package localsock_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/custody-dev/custody/internal/localsock"
)

// TestPeerCredIsTheDialer checks that each side sees the other's real pid and uid, and that the
// socket node is its user's alone.
func TestPeerCredIsTheDialer(t *testing.T) {
	dir, err := localsock.MkdirPrivate("", "custody-localsock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	ln, err := localsock.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("socket mode %v: reachable by others", perm)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err == nil {
			defer c.Close()
			var cred localsock.Cred
			cred, err = localsock.CheckSameUser(c)
			if err == nil && cred.PID != os.Getpid() {
				t.Errorf("listener sees pid %d, want %d", cred.PID, os.Getpid())
			}
		}
		accepted <- err
	}()
	c, err := localsock.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cred, err := localsock.PeerCred(c)
	if err != nil {
		t.Fatal(err)
	}
	if cred.PID != os.Getpid() || cred.UID != os.Geteuid() {
		t.Errorf("dialer sees %+v, want pid %d uid %d", cred, os.Getpid(), os.Geteuid())
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}
