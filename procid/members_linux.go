package procid

import (
	"bytes"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/procfs"
)

// GroupHasLive reports whether any process of group pgid is alive, not a zombie, by scanning
// /proc. kill(-pgid, 0) cannot tell: it succeeds while any member is a zombie, and an orphaned
// zombie stays one until init reaps it, which some inits do only every second or so. A process
// that cannot be read counts as alive, and where /proc is mounted with hidepid (and the caller is
// not root) the scan returns [ErrScanBlind]: it proves emptiness, never guesses it.
func GroupHasLive(pgid int) (bool, error) {
	live := false
	err := scanGroups(func(g int) bool {
		live = g == pgid
		return !live
	})
	return live || err != nil, err
}

// LiveGroups returns the process groups that have at least one live (non-zombie) member, from
// one scan of /proc; see [GroupHasLive] for what the scan can prove.
func LiveGroups() (map[int]bool, error) {
	live := map[int]bool{}
	err := scanGroups(func(g int) bool {
		live[g] = true
		return true
	})
	return live, err
}

// scanGroups calls fn with the group of every live process until fn returns false.
func scanGroups(fn func(pgid int) bool) error {
	if err := scanBlind(); err != nil {
		return err
	}
	d, err := os.Open(procRoot)
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	buf := statBufs.Get().(*[1024]byte)
	defer statBufs.Put(buf)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		n, err := procfs.ReadSmall(procRoot+"/"+name+"/stat", buf[:])
		if err == unix.ENOENT || err == unix.ESRCH {
			continue // exited and reaped during the scan
		}
		if err != nil {
			return ErrScanUnreadable
		}
		inc, err := parseStat(buf[:n])
		if err != nil {
			return ErrScanUnreadable
		}
		if !inc.Zombie && !fn(inc.PGID) {
			return nil
		}
	}
	return nil
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
