package procid

import (
	"encoding/binary"
	"os"

	"golang.org/x/sys/unix"
)

// listPIDs reads the numeric entries of /proc with getdents64(2) into ints, without the string
// per entry that Readdirnames would allocate: a third of the cost of a signal-0 probe per row.
func listPIDs() ([]int32, error) {
	fd, err := unix.Open(procRoot, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("open", err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 32<<10)
	pids := make([]int32, 0, 1024)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("getdents64", err)
		}
		if n <= 0 {
			return pids, nil
		}
		pids = appendDirentPIDs(pids, buf[:n])
	}
}

// appendDirentPIDs parses linux_dirent64 records: d_ino u64, d_off i64, d_reclen u16, d_type u8,
// then the NUL-terminated name.
func appendDirentPIDs(pids []int32, b []byte) []int32 {
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		if pid, ok := atoiName(b[19:reclen]); ok {
			pids = append(pids, pid)
		}
		b = b[reclen:]
	}
	return pids
}

func atoiName(name []byte) (int32, bool) {
	var n int64
	for i, c := range name {
		if c == 0 {
			return int32(n), i > 0
		}
		if c < '0' || c > '9' || n > 1<<31 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return int32(n), len(name) > 0 && n < 1<<31
}
