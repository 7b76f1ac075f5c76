package agent

import (
	"os"
	"slices"
)

// stdio is a start's three streams: the child's side of each, and the client's ends of the pipes
// the agent made, to be passed back with the reply.
type stdio struct {
	child  [3]*os.File // nil: the null device (os/exec opens it)
	owned  []*os.File  // the child's side of what the agent opened or was passed: closed once it started
	client []*os.File  // the client's ends of "pipe" entries, in order
	names  []string    // which stream each of client is
}

func (st *stdio) closeChildSide() {
	for _, f := range st.owned {
		f.Close()
	}
	st.owned = nil
}

func (st *stdio) closeClientSide() {
	for _, f := range st.client {
		f.Close()
	}
	st.client, st.names = nil, nil
}

// stdio checks a start's stdio entries against the descriptors that came with it and makes what
// they ask for. On error every descriptor of f and everything made is closed.
func (s *server) stdio(r startRequest, f *frame) (_ *stdio, e *replyError) {
	entries := r.Stdio
	if entries == nil {
		entries = []string{"inherit", "inherit", "inherit"}
	}
	if len(entries) != 3 {
		f.closeFDs()
		return nil, errorf(codeBadRequest, "stdio: want 3 entries, got %d", len(entries))
	}
	wantFDs, fifos := 0, 0
	for i, e := range entries {
		switch e {
		case "inherit", "null", "pipe":
		case "fd":
			wantFDs++
		case "fifo":
			fifos++
		case "stdout":
			if i != 2 {
				f.closeFDs()
				return nil, errorf(codeBadRequest, "stdio[%d]: \"stdout\" is for stderr only", i)
			}
		default:
			f.closeFDs()
			return nil, errorf(codeBadRequest, "stdio[%d]: %q is not inherit, null, fd, pipe, fifo or stdout", i, e)
		}
	}
	if len(f.fds) != wantFDs || f.lostFDs {
		n := len(f.fds)
		f.closeFDs()
		if f.lostFDs {
			return nil, errorf(codeFDMismatch, "more descriptors came with the start than one message can carry")
		}
		return nil, errorf(codeFDMismatch, "stdio declares %d descriptors (\"fd\" entries), but %d came with the start", wantFDs, n)
	}
	if fifos > 0 && r.Fifos == "" {
		return nil, errorf(codeBadRequest, "stdio has \"fifo\" entries, but the start names no fifos token")
	}
	st := &stdio{owned: slices.Clone(f.fds)}
	f.fds = nil
	defer func() {
		if e != nil {
			st.closeChildSide()
			st.closeClientSide()
		}
	}()
	var set *fifoSet
	if r.Fifos != "" {
		if set = s.fifos.take(r.Fifos); set == nil {
			return nil, errorf(codeNoSuchFifo, "fifos %q names no live token", r.Fifos)
		}
		st.owned = append(st.owned, set.all()...)
	}
	passed := 0
	for i, e := range entries {
		switch e {
		case "inherit":
			st.child[i] = []*os.File{os.Stdin, os.Stdout, os.Stderr}[i]
		case "fd":
			st.child[i] = st.owned[passed]
			passed++
		case "pipe":
			r, w, err := os.Pipe()
			if err != nil {
				return nil, errorf(codeStartFailed, "stdio[%d]: %v", i, err)
			}
			mine, theirs := r, w // the child reads stdin
			if i > 0 {
				mine, theirs = w, r
			}
			st.owned = append(st.owned, mine)
			st.client = append(st.client, theirs)
			st.names = append(st.names, streamNames[i])
			st.child[i] = mine
		case "fifo":
			end := set.end(i)
			if end == nil {
				return nil, errorf(codeNoSuchFifo, "fifos %q has no %s", r.Fifos, streamNames[i])
			}
			st.child[i] = end
		case "stdout":
			st.child[2] = st.child[1]
		}
	}
	return st, nil
}
