package custody_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
)

// A giver killed mid-grant leaves its grant's directory in the temporary directory; the next
// grant made there removes it, and a sweep leaves the directory of a giver that still serves.
func TestGrantDirSwept(t *testing.T) {
	env := newTransferEnv(t, false)
	live := startGiver(t, env)
	dead := startGiver(t, env)
	liveDir, deadDir := grantDir(t, live.grant), grantDir(t, dead.grant)
	killAndWait(t, dead.Proc)
	if _, err := os.Lstat(deadDir); err != nil {
		t.Fatalf("the killed giver's directory: %v, want it left (the test proves nothing)", err)
	}

	o := newOwner(t)
	c, _, _ := start(t, o, custody.StartOptions{Purpose: "gateway"})
	g, err := c.Grant(custody.GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Cancel()
	testproc.WaitFor(t, 10*time.Second, func() error {
		if _, err := os.Lstat(deadDir); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the killed giver's directory %s: %v, want it removed", deadDir, err)
		}
		return nil
	})
	own := grantDir(t, g.String())
	if removed := custody.SweepGrantDirs(filepath.Dir(liveDir), ""); slices.Contains(removed, liveDir) || slices.Contains(removed, own) {
		t.Fatalf("a sweep removed %v, a directory of a grant still served", removed)
	}
	for _, d := range []string{liveDir, own} {
		if _, err := os.Lstat(filepath.Join(d, "s")); err != nil {
			t.Errorf("a grant still served: %v", err)
		}
	}
}

// grantDir returns the directory of the grant's socket.
func grantDir(t *testing.T, grant string) string {
	t.Helper()
	tok, err := custody.ParseGrant(grant)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(tok.Sock)
}
