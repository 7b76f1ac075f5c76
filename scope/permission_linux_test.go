package scope_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

func init() { testproc.Register("group-as-nobody", helperGroupAsNobody) }

// TestGroupPermissionDenied signals a root-owned group from uid 65534, through a scope pinned by
// its leader's pidfd (pidfd_open and the proof work across users) and through a checked one: the
// kernel refuses both, the refusal satisfies os.ErrPermission, and nothing is killed.
func TestGroupPermissionDenied(t *testing.T) {
	testproc.RequireRoot(t)
	leader, member, id := startGroup(t)
	h := testproc.Start(t, testproc.Helper(t, "group-as-nobody", strconv.Itoa(id.PID), strconv.FormatUint(id.Start, 10)))
	for _, mode := range []string{"pinned", "checked"} {
		f := h.Expect(mode+" ", 30*time.Second)
		t.Logf("%s signal as uid 65534: %s", mode, strings.Join(f, " "))
		if f[0] != "permission" {
			t.Errorf("%s signal as uid 65534: %s; want a permission error", mode, strings.Join(f, " "))
		}
	}
	mustAlive(t, leader, member)
}

// helperGroupAsNobody drops to uid/gid 65534, opens the group that args name, and reports how a
// SIGTERM to it failed: pinned, then checked (released).
func helperGroupAsNobody(args []string) int {
	pid, _ := strconv.Atoi(args[0])
	start, _ := strconv.ParseUint(args[1], 10, 64)
	// Go applies set*id to every thread of the process (Go 1.16+).
	if err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(65534), syscall.Setuid(65534)); err != nil {
		fmt.Fprintln(os.Stderr, "drop privileges:", err)
		return 1
	}
	s, err := scope.FromGroup(pid, procid.ID{PID: pid, Start: start})
	if err != nil {
		fmt.Println("pinned unexpected", err)
		return 1
	}
	for _, mode := range []string{"pinned", "checked"} {
		switch err := s.Signal(syscall.SIGTERM); {
		case mode == "pinned" && !s.Pinned():
			fmt.Println(mode, "unexpected: not pinned")
		case errors.Is(err, os.ErrPermission) && !errors.Is(err, authority.ErrNoAuthority) && !errors.Is(err, procid.ErrGone):
			fmt.Println(mode, "permission", err)
		default:
			fmt.Println(mode, "unexpected", err)
		}
		s.Release()
	}
	return 0
}
