package scope

// The environment sweep on macOS, which has no pidfd. Facts relied on:
//
//	sysctl kern.proc.all      every process's kinfo_proc: its PID, its start (p_starttime, in
//	                          microseconds), its state (SZOMB) and its uids
//	sysctl KERN_PROCARGS2     argc, the exec path, argv and the environment block the process
//	                          exec'd with; readable for the processes of the caller's user
//	                          (EINVAL for others, and for a zombie)
//
// A stray is held by its PID and start: the start is checked again immediately before each
// kill(2), which leaves a window of microseconds in which a recycled PID could be signalled (as
// every checked signal on macOS; see package authority).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// _SZOMB is a zombie's p_stat (sys/proc.h).
const _SZOMB = 5

// stray is one process found carrying a scope id, held by its PID and start.
type stray struct {
	pid   int
	start unix.Timeval
}

func findStrays(ids []string, uid int, held func(pid int) bool) ([]*stray, error) {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, os.NewSyscallError("sysctl kern.proc.all", err)
	}
	var guard *authority.Guard
	var found []*stray
	for i := range procs {
		kp := &procs[i]
		pid := int(kp.Proc.P_pid)
		if pid <= 1 || pid == os.Getpid() || held(pid) || kp.Proc.P_stat == _SZOMB || !ranAs(kp, uid) {
			continue
		}
		if env, err := procEnviron(pid); err != nil || !carries(env, ids) {
			continue
		}
		if guard == nil {
			g := authority.NewGuard()
			guard = &g
		}
		if guard.Refuse(pid) == nil {
			found = append(found, &stray{pid: pid, start: kp.Proc.P_starttime})
		}
	}
	return found, nil
}

// ranAs reports whether the process runs as uid: real, effective and saved uids.
func ranAs(kp *unix.KinfoProc, uid int) bool {
	u := uint32(uid)
	return kp.Eproc.Ucred.Uid == u && kp.Eproc.Pcred.P_ruid == u && kp.Eproc.Pcred.P_svuid == u
}

// procEnviron returns pid's environment block from KERN_PROCARGS2: after argc (a 32-bit int),
// the exec path, the NULs that pad it, and argc arguments.
func procEnviron(pid int) ([]byte, error) {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return nil, err
	}
	if len(b) < 4 {
		return nil, errors.New("procargs2: short")
	}
	argc := int(binary.LittleEndian.Uint32(b))
	b = b[4:]
	i := bytes.IndexByte(b, 0) // the exec path
	if i < 0 {
		return nil, errors.New("procargs2: no exec path")
	}
	b = bytes.TrimLeft(b[i:], "\x00")
	for ; argc > 0 && len(b) > 0; argc-- {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return nil, nil
		}
		b = b[i+1:]
	}
	if end := bytes.Index(b, []byte{0, 0}); end >= 0 { // the block ends at an empty string
		b = b[:end+1]
	}
	return b, nil
}

// current reports whether the PID still names the stray's incarnation, alive.
func (p *stray) current() (bool, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", p.pid)
	if err != nil {
		return false, os.NewSyscallError("sysctl kern.proc.pid", err)
	}
	return kp.Proc.P_pid == int32(p.pid) && kp.Proc.P_starttime == p.start && kp.Proc.P_stat != _SZOMB, nil
}

func (p *stray) signal(sig os.Signal) error {
	us, ok := sig.(unix.Signal)
	if !ok {
		return fmt.Errorf("signal %v: %w", sig, errors.ErrUnsupported)
	}
	if ok, err := p.current(); err != nil || !ok {
		return fmt.Errorf("pid %d: %w", p.pid, procid.ErrGone)
	}
	if err := unix.Kill(p.pid, us); err == unix.ESRCH {
		return fmt.Errorf("pid %d: %w", p.pid, procid.ErrGone)
	} else if err != nil {
		return procid.SyscallError("kill", err)
	}
	return nil
}

// exited reports whether the stray is gone: the sysctl fails (EIO in x/sys: nothing was returned)
// only for a PID no process holds.
func (p *stray) exited() bool {
	ok, err := p.current()
	return err != nil || !ok
}

func (p *stray) close() {}
