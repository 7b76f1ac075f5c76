//go:build unix

package agent

import (
	"net"
	"os"
)

// Serve serves the client at the other end of uc until it ends: until uc reaches end of file (or
// fails), or cfg.OwnerDone is closed. Then it stops every child still held, concurrently, each with
// its own grace, drops their rows, closes uc and returns. Its error is what the final stop could
// not do; a child whose exit could not be proven keeps its row, for reap.
func Serve(uc *net.UnixConn, cfg Config) error { return serveConn(newConn(uc), cfg) }

// capabilities are what the hello names: descriptors travel both ways (SCM_RIGHTS).
var capabilities = []string{"fds", "pipe", "fifo", "start", "fifos", "signal", "stop", "release", "grant", "adopt",
	"list", "ping"}

// passedIn does nothing here: the descriptors of "fd" entries came with the line (SCM_RIGHTS).
func (s *server) passedIn(startRequest, *frame) *replyError { return nil }

// handOver returns the client's ends of the pipes, to go with the reply as SCM_RIGHTS.
func (s *server) handOver(_ *started, client []*os.File) ([]*os.File, *replyError) {
	return client, nil
}
