//go:build linux || darwin

package custody_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/stop"
)

// forge re-encodes a grant with change applied to its fields.
func forge(t *testing.T, grant string, change func(*custody.GrantToken)) string {
	t.Helper()
	tok, err := custody.ParseGrant(grant)
	if err != nil {
		t.Fatal(err)
	}
	change(&tok)
	b, _ := json.Marshal(tok)
	return "custody-grant-v1:" + base64.RawURLEncoding.EncodeToString(b)
}

func readLedger(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGrantRefusals: malformed, forged, expired, misdirected and reused grants are refused with
// nothing changed, and the genuine grant still works after every refusal before it.
func TestGrantRefusals(t *testing.T) {
	giver := newOwner(t)
	c, _, _ := start(t, giver, custody.StartOptions{Purpose: "gateway"})
	g, err := c.Grant(custody.GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	receiver := newOwner(t)
	receiver.Ledger = giver.Ledger
	before := readLedger(t, giver.Ledger.Path())
	emptyObj := "custody-grant-v1:" + base64.RawURLEncoding.EncodeToString([]byte("{}"))
	for _, tc := range []struct {
		name  string
		grant string
		want  error
	}{
		{"empty", "", custody.ErrGrantMalformed},
		{"another version", strings.Replace(g.String(), "-v1:", "-v2:", 1), custody.ErrGrantMalformed},
		{"not base64", "custody-grant-v1:!!!", custody.ErrGrantMalformed},
		{"empty object", emptyObj, custody.ErrGrantMalformed},
		{"truncated", g.String()[:len(g.String())-5], custody.ErrGrantMalformed},
		{"forged secret", forge(t, g.String(), func(tok *custody.GrantToken) { tok.Secret = custody.NewSecret() }), custody.ErrGrantRefused},
		{"expired", forge(t, g.String(), func(tok *custody.GrantToken) { tok.Expires = time.Now().Add(-time.Second).UnixMilli() }), custody.ErrGrantExpired},
		{"another giver", forge(t, g.String(), func(tok *custody.GrantToken) { tok.Giver = os.Getppid() }), custody.ErrGrantRefused},
	} {
		_, err := receiver.Adopt(context.Background(), tc.grant)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error of more than one line: %q", tc.name, err)
		}
		if after := readLedger(t, giver.Ledger.Path()); !bytes.Equal(before, after) {
			t.Fatalf("%s changed the ledger:\n%s\n%s", tc.name, before, after)
		}
	}
	other := newOwner(t) // another ledger: its receipt could not be found
	if _, err := other.Adopt(context.Background(), g.String()); err == nil {
		t.Error("a grant redeemed into another ledger was accepted")
	}
	if res := g.Result(); res.Outcome != 0 {
		t.Fatalf("refusals ended the grant: %+v", res)
	}
	adopted, err := receiver.Adopt(context.Background(), g.String())
	if err != nil {
		t.Fatalf("the genuine grant, after the refusals: %v", err)
	}
	if res, _ := g.Wait(context.Background()); res.Outcome != custody.Transferred || res.Receiver != os.Getpid() {
		t.Fatalf("giver's result %+v", res)
	}
	if _, err := receiver.Adopt(context.Background(), g.String()); !errors.Is(err, custody.ErrGrantRefused) {
		t.Errorf("a grant used twice: %v", err)
	}
	if res := c.Stop(context.Background(), stop.Options{}); res.Outcome != stop.NoAuthority {
		t.Errorf("the giver stopped a child it handed over: %+v", res)
	}
	if res := adopted.Stop(context.Background(), stop.Options{Grace: time.Second}); !res.OK() {
		t.Fatalf("the receiver's stop: %+v", res)
	}
	// Killed by the stop's SIGTERM. Its parent, this process, reaps it at once; Linux 6.15+ then
	// tells the adopter how it ended, other systems do not.
	err = adopted.Wait()
	if ee, ok := errors.AsType[*custody.ExitError](err); exitInfo() && (!ok || ee.Signal != syscall.SIGTERM) {
		t.Errorf("an adopted child's Wait after its stop: %v, want killed by SIGTERM", err)
	} else if !exitInfo() && !errors.Is(err, custody.ErrExitUnknown) {
		t.Errorf("an adopted child's Wait after its stop: %v, want ErrExitUnknown", err)
	}
	if rows, err := giver.Ledger.Rows(context.Background()); err != nil || len(rows) != 0 {
		t.Errorf("rows after the receiver's stop: %v, %v", rows, err)
	}
}

// exitInfo reports whether the kernel tells a pidfd's holder how its process ended (Linux 6.15+).
func exitInfo() bool {
	var u unix.Utsname
	if runtime.GOOS != "linux" || unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major > 6 || major == 6 && minor >= 15
}

// TestGrantVoid: a grant nobody redeems expires, and one whose child exits is void; both are
// refused afterwards.
func TestGrantVoid(t *testing.T) {
	o := newOwner(t)
	c, _, _ := start(t, o, custody.StartOptions{})
	short, err := c.Grant(custody.GrantOptions{TTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	long, err := c.Grant(custody.GrantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := short.Wait(context.Background()); res.Outcome != custody.Expired {
		t.Errorf("unredeemed grant: %+v, want expired", res)
	}
	late := forge(t, short.String(), func(tok *custody.GrantToken) { tok.Expires = time.Now().Add(time.Hour).UnixMilli() })
	if _, err := o.Adopt(context.Background(), late); !errors.Is(err, custody.ErrGrantRefused) {
		t.Errorf("an expired grant with its expiry pushed back: %v", err)
	}
	c.Stop(context.Background(), stop.Options{Grace: time.Second})
	if res, _ := long.Wait(context.Background()); res.Outcome != custody.Refused {
		t.Errorf("grant of an exited child: %+v, want refused", res)
	}
	if _, err := o.Adopt(context.Background(), long.String()); !errors.Is(err, custody.ErrGrantRefused) {
		t.Errorf("grant of an exited child: %v", err)
	}
}

// TestGrantOtherUser: a grant is refused to another user, both ways round, and the child stays
// the giver's.
func TestGrantOtherUser(t *testing.T) {
	testproc.RequireRoot(t)
	t.Run("nobody redeems root's", func(t *testing.T) {
		env := newTransferEnv(t, true)
		root := newTransferEnv(t, false)
		g := startGiver(t, root)
		r := testproc.Start(t, env.command(t, "receiver", root.ledger, g.grant))
		if f := strings.Join(r.Expect("error ", 30*time.Second), " "); !strings.Contains(f, "another user") {
			t.Errorf("nobody redeeming root's grant: %s", f)
		}
		mustAlive(t, "the child", g.child)
		if owner := ownerOf(t, root.ledger, g.child.PID); owner != g.Process.Pid {
			t.Errorf("row's owner %d, want the giver %d", owner, g.Process.Pid)
		}
	})
	t.Run("root redeems nobody's", func(t *testing.T) {
		env := newTransferEnv(t, true)
		g := startGiver(t, env)
		r := testproc.Start(t, (&transferEnv{ledger: env.ledger, exe: env.exe}).command(t, "receiver", env.ledger, g.grant))
		if f := strings.Join(r.Expect("error ", 30*time.Second), " "); !strings.Contains(f, "uid 65534's") {
			t.Errorf("root redeeming nobody's grant: %s", f)
		}
		mustAlive(t, "the child", g.child)
		if owner := ownerOf(t, env.ledger, g.child.PID); owner != g.Process.Pid {
			t.Errorf("row's owner %d, want the giver %d", owner, g.Process.Pid)
		}
	})
}
