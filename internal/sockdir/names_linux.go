package sockdir

import (
	"bytes"
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// eachName calls fn with the name of each entry of the directory tmp that starts with prefix.
// It reads the directory with getdents64 into one buffer and compares the names where they lie:
// a shared temporary directory may hold a hundred thousand files, and a string for each (as
// os.File.Readdirnames makes) is some 6 MB of garbage, several times the memory of a supervisor,
// which sweeps and runs with the collector off. Only a matching name is copied out.
func eachName(tmp, prefix string, fn func(name string)) {
	fd, err := unix.Open(tmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	buf := make([]byte, 16<<10)
	p := []byte(prefix)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16, d_type u8, d_name[],
		// NUL-terminated and padded to d_reclen.
		for rec := buf[:n]; len(rec) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(rec[16:18]))
			if reclen < 19 || reclen > len(rec) {
				return // not a record the kernel writes
			}
			name := rec[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if bytes.HasPrefix(name, p) {
				fn(string(name))
			}
			rec = rec[reclen:]
		}
	}
}
