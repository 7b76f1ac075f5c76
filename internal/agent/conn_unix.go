//go:build unix

package agent

import (
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// maxFDs is the most descriptors one read accepts: Linux's SCM_MAX_FD. More are cut short by the
// kernel (MSG_CTRUNC), and the message they came with is answered fd-mismatch.
const maxFDs = 253

// conn is the client's connection: lines and descriptors in, lines and descriptors out.
type conn struct {
	uc  *net.UnixConn
	wmu sync.Mutex // one message at a time: a line with descriptors must not interleave with another
	oob []byte
	buf []byte
}

func newConn(uc *net.UnixConn) *conn {
	return &conn{uc: uc, oob: make([]byte, unix.CmsgSpace(maxFDs*4)), buf: make([]byte, 64<<10)}
}

// read reads once and returns the lines completed. Descriptors arrive close-on-exec (Go asks
// for MSG_CMSG_CLOEXEC, or sets it itself where the flag does not exist), so a child started
// meanwhile never inherits one by accident.
func (c *conn) read(s *splitter) ([]frame, error) {
	n, oobn, flags, _, err := c.uc.ReadMsgUnix(c.buf, c.oob)
	var fds []*os.File
	if oobn > 0 {
		fds = parseRights(c.oob[:oobn])
	}
	if n <= 0 && err != nil { // n is -1 with some errors
		for _, f := range fds {
			f.Close()
		}
		return nil, err
	}
	return s.add(c.buf[:n], fds, flags&unix.MSG_CTRUNC != 0), nil
}

// parseRights returns the descriptors of SCM_RIGHTS messages; other control messages are
// ignored.
func parseRights(oob []byte) []*os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "passed"))
		}
	}
	return files
}

// send writes one message, its descriptors attached to the first sendmsg(2) of its line, the
// rest of the line (if the kernel took only part) by plain writes, as "Framing" asks.
func (c *conn) send(line []byte, fds []*os.File) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(fds) == 0 {
		_, err := c.uc.Write(line)
		return err
	}
	raw := make([]int, len(fds))
	for i, f := range fds {
		raw[i] = int(f.Fd())
	}
	n, _, err := c.uc.WriteMsgUnix(line, unix.UnixRights(raw...), nil)
	if err != nil {
		return err
	}
	if n < len(line) {
		_, err = c.uc.Write(line[n:])
	}
	return err
}

func (c *conn) close() error { return c.uc.Close() }

// stopReading makes the pending read and every later one fail at once.
func (c *conn) stopReading() { c.uc.SetReadDeadline(time.Now()) }

// limitWrites bounds every later write by d: a client that reads no more cannot hold the agent.
func (c *conn) limitWrites(d time.Duration) { c.uc.SetWriteDeadline(time.Now().Add(d)) }
