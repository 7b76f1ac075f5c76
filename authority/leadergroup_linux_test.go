package authority_test

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
)

// SignalGroup reaches every member of the group the process leads, through its pidfd; a kernel
// without PIDFD_SIGNAL_PROCESS_GROUP says unsupported. (Whether an emptied group then answers gone
// depends on whether init has reaped the orphaned grandchild's zombie, which still counts.)
func TestSignalGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exec 3<&0; cat <&3 3<&- & echo $!; exec cat 3<&-")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := testproc.Start(t, cmd)
	grand, _ := strconv.Atoi(strings.TrimSpace(p.Line(30 * time.Second)))
	leader, err := authority.FromOS(p.Process)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	g, err := procid.Read(grand)
	if err != nil || g.PGID != p.Process.Pid {
		t.Fatalf("grandchild %d: %+v, %v; want it in group %d", grand, g, err, p.Process.Pid)
	}
	err = leader.SignalGroup(syscall.SIGTERM)
	if errors.Is(err, errors.ErrUnsupported) {
		testproc.Skip(t, "no group signal through a pidfd here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	p.Wait()
	testproc.WaitFor(t, 30*time.Second, func() error {
		if err := g.ID.Verify(); err == nil {
			return errors.New("the grandchild still runs")
		}
		return nil
	})
}
