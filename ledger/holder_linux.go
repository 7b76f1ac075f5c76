package ledger

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// lockHolder finds the process holding a flock on path in /proc/locks, matched by inode, and its
// scheduler state from /proc/PID/stat ("T" when stopped). It returns 0 when it cannot tell.
func lockHolder(path string) (pid int, state string) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0, ""
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, ""
	}
	ino := []byte(":" + strconv.FormatUint(st.Ino, 10))
	for line := range bytes.Lines(locks) {
		// "1: FLOCK  ADVISORY  WRITE 4242 00:1f:123456 0 EOF"; blocked waiters carry "->".
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[1]) != "FLOCK" || !bytes.HasSuffix(f[5], ino) {
			continue
		}
		if pid, err = strconv.Atoi(string(f[4])); err != nil {
			continue
		}
		return pid, procState(pid)
	}
	return 0, ""
}

func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+3 > len(b) {
		return ""
	}
	return string(b[i+2 : i+3])
}
