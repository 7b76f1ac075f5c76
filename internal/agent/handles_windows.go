package agent

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// capabilities are what the hello names: handles are duplicated between the processes
// ("handles"), not passed in the stream ("fds"); named pipes by name are not served yet.
var capabilities = []string{"handles", "pipe", "start", "signal", "stop", "release", "grant", "adopt", "list", "ping"}

// passedIn takes the handles of the start's "fd" entries: each a handle value in the client's
// process, duplicated from there into the agent. The agent pulls them, rather than the client
// pushing them in, so that no value the client names can make the agent use, and then close, a
// handle of its own (its pipe, its ledger).
func (s *server) passedIn(r startRequest, f *frame) *replyError {
	for i, v := range r.Handles {
		var h windows.Handle
		err := windows.DuplicateHandle(s.c.client.h, windows.Handle(v), windows.CurrentProcess(), &h, 0, false,
			windows.DUPLICATE_SAME_ACCESS)
		if err != nil {
			f.closeFDs()
			return errorf(codeFDMismatch, "handles[%d] %d: not a handle of the client: %v", i, v,
				os.NewSyscallError("DuplicateHandle", err))
		}
		f.fds = append(f.fds, os.NewFile(uintptr(h), fmt.Sprintf("handle %d", v)))
	}
	return nil
}

// handOver duplicates the client's ends of the pipes into the client's process and names their
// values there in the reply. A failure closes the copies made so far, in the client too.
func (s *server) handOver(res *started, client []*os.File) ([]*os.File, *replyError) {
	for _, f := range client {
		var h windows.Handle
		err := windows.DuplicateHandle(windows.CurrentProcess(), windows.Handle(f.Fd()), s.c.client.h, &h, 0, false,
			windows.DUPLICATE_SAME_ACCESS)
		if err != nil {
			for _, v := range res.Handles {
				windows.DuplicateHandle(s.c.client.h, windows.Handle(v), 0, nil, 0, false, windows.DUPLICATE_CLOSE_SOURCE)
			}
			res.Handles = nil
			return nil, errorf(codeStartFailed, "duplicate a pipe into the client: %v", os.NewSyscallError("DuplicateHandle", err))
		}
		res.Handles = append(res.Handles, uint64(h))
	}
	return nil, nil
}
