package agent

import (
	"errors"
	"os"
	"sync"
	"time"
)

// conn is the client's connection on Windows: the server end of a named pipe opened for
// overlapped I/O, which os.NewFile (Go 1.25+) associates with the runtime's completion port, so
// reads and writes take deadlines. No handle travels in the stream: they are named in the
// messages and duplicated between the processes (see passedIn and handOver).
type conn struct {
	f   *os.File
	wmu sync.Mutex // one message at a time
	buf []byte

	// client is the client's process, opened at connect with PROCESS_DUP_HANDLE (see Accept).
	client *clientProcess
}

// read reads once and returns the lines completed.
func (c *conn) read(s *splitter) ([]frame, error) {
	n, err := c.f.Read(c.buf)
	if n <= 0 && err != nil {
		return nil, err
	}
	return s.add(c.buf[:n], nil, false), nil
}

// send writes one message; fds are never given here (handOver names them in the line instead).
func (c *conn) send(line []byte, fds []*os.File) error {
	if len(fds) > 0 {
		return errors.New("agent: descriptors do not travel on a named pipe")
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.f.Write(line)
	return err
}

func (c *conn) close() error { return errors.Join(c.f.Close(), c.client.close()) }

// stopReading makes the pending read and every later one fail at once.
func (c *conn) stopReading() { c.f.SetReadDeadline(time.Now()) }

// limitWrites bounds every later write by d: a client that reads no more cannot hold the agent.
func (c *conn) limitWrites(d time.Duration) { c.f.SetWriteDeadline(time.Now().Add(d)) }
