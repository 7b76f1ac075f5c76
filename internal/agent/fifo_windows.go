package agent

import "os"

// Named pipes by name (docs/agent.md, "fifos") are not served on Windows yet: a client there
// receives its pipes' handles duplicated into its process (see handOver), and "fifo" entries name
// no live token.

type fifoSet struct{}

func (f *fifoSet) end(int) *os.File { return nil }

func (f *fifoSet) all() []*os.File { return nil }

type fifoStore struct{}

func newFifoStore() *fifoStore { return &fifoStore{} }

func (st *fifoStore) take(string) *fifoSet { return nil }

func (st *fifoStore) close() {}

func (s *server) makeFifos(req request, f *frame) {
	s.fail(req.id, errorf(codeUnsupported, "fifos: not served on Windows; a \"pipe\" entry's handle is duplicated into the client"))
}
