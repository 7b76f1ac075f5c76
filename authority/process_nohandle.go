//go:build unix && !linux

package authority

// No process handles outside Linux and Windows: macOS has no pidfd (kqueue's EVFILT_PROC watches a
// PID, not a process, and cannot signal). Every Process here is in checked mode (process_checked.go).

import (
	"os"

	"github.com/custody-dev/custody/procid"
)

type sysProcess struct {
	osp *os.Process // set by FromOS: the caller's own child
}

func acquire(rec procid.Record) (*Process, error) { return acquireChecked(rec) }

func fromOS(osp *os.Process) (*Process, error) { return fromOSChecked(osp) }

func fromChild(osp *os.Process, _ procid.ID) (*Process, error) { return fromOSChecked(osp) }

func (p *Process) pinned() bool { return p.sys.osp != nil }

func (p *Process) signal(sig os.Signal) error {
	s, err := unixSignal(sig)
	if err != nil {
		return err
	}
	return p.checkedSignal(s)
}

func (p *Process) exited() (bool, error) { return p.checkedExited() }

func (p *Process) watch() error { return p.checkedWatch() }

func (p *Process) close() error { return nil }
