package procfs

import (
	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/eintr"
)

// Append appends the whole file at path to b, reading until end of file and growing b as the
// file needs: for files of any length (a process's environment block, a thread's children), and
// for files the kernel renders a page at a time. On an error it returns b with what had been read.
func Append(path string, b []byte) ([]byte, error) {
	fd, err := eintr.Retry(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return b, err
	}
	defer unix.Close(fd)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := eintr.Retry(func() (int, error) { return unix.Read(fd, b[len(b):cap(b)]) })
		if err != nil {
			return b, err
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// ReadSmall reads a whole small file into buf with three system calls and returns its length. It
// is for files the kernel renders whole at the first read (/proc/PID/stat and status are
// single_open seq files), so a read that leaves room in buf has returned everything and the read
// that would return 0 is not made; a file as long as buf or longer is cut at len(buf).
func ReadSmall(path string, buf []byte) (int, error) {
	fd, err := eintr.Retry(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := eintr.Retry(func() (int, error) { return unix.Read(fd, buf[n:]) })
		if err != nil {
			return 0, err
		}
		n += m
		if m == 0 || n < len(buf) {
			break
		}
	}
	return n, nil
}
