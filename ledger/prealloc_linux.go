package ledger

import (
	"os"

	"golang.org/x/sys/unix"
)

// preallocate reserves size bytes of disk for f without changing its length. On ext4 a file
// written into delayed allocation and then renamed over another file has its data written back
// inside rename(2) (the auto_da_alloc safeguard), which costs most of a ledger append; blocks
// reserved ahead leave nothing for the rename to allocate. Failure only loses the speed-up: some
// filesystems have no fallocate.
func preallocate(f *os.File, size int64) {
	if size <= 0 {
		return
	}
	if c, err := f.SyscallConn(); err == nil {
		c.Control(func(fd uintptr) { unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, 0, size) })
	}
}
