package procid

import (
	"bytes"
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrScanBlind reports that /proc hides other users' processes from this one (hidepid), so a
// scan cannot prove that a group has no live member.
var ErrScanBlind = errors.New("procid: /proc hides other users' processes (hidepid)")

// GroupHasLive reports whether any process of group pgid is alive, not a zombie, by scanning
// /proc. kill(-pgid, 0) cannot tell: it succeeds while any member is a zombie, and an orphaned
// zombie stays one until init reaps it, which some inits do only every second or so. A process
// that cannot be read counts as alive, and where /proc is mounted with hidepid (and the caller is
// not root) the scan returns [ErrScanBlind]: it proves emptiness, never guesses it.
func GroupHasLive(pgid int) (bool, error) {
	if err := scanBlind(); err != nil {
		return true, err
	}
	d, err := os.Open(procRoot)
	if err != nil {
		return true, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true, err
	}
	buf := statBufs.Get().(*[1024]byte)
	defer statBufs.Put(buf)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		n, err := readSmall(procRoot+"/"+name+"/stat", buf[:])
		if err == unix.ENOENT || err == unix.ESRCH {
			continue // exited and reaped during the scan
		}
		if err != nil {
			return true, nil
		}
		inc, err := parseStat(buf[:n])
		if err != nil || inc.PGID == pgid && !inc.Zombie {
			return true, nil
		}
	}
	return false, nil
}

// scanBlind reports whether /proc hides processes from this caller: mounted with hidepid (or its
// newer names, invisible/noaccess) and the caller is not root.
var scanBlind = sync.OnceValue(func() error {
	if os.Geteuid() == 0 {
		return nil
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for line := range bytes.Lines(mi) {
		f := bytes.Fields(line)
		if len(f) > 4 && string(f[4]) == procRoot && bytes.Contains(line, []byte(" - proc ")) &&
			(bytes.Contains(line, []byte("hidepid=")) && !bytes.Contains(line, []byte("hidepid=0")) &&
				!bytes.Contains(line, []byte("hidepid=off"))) {
			return ErrScanBlind
		}
	}
	return nil
})
