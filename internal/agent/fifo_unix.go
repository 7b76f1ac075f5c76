//go:build unix

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/localsock"
)

// fifoTTL is how long a fifos token waits for its start before it is withdrawn.
const fifoTTL = 10 * time.Second

// fifoSet is the named pipes of one fifos token, and the agent's side of each, opened already so
// that the client's opens neither block nor fail for want of the other side.
type fifoSet struct {
	paths [3]string
	ends  [3]*os.File // the child's side: read end for stdin, write end for stdout and stderr
	extra []*os.File  // for stdout and stderr, a read end held until the start: see open
	timer *time.Timer
}

// end returns the child's side of stream i, or nil when the token did not make it.
func (f *fifoSet) end(i int) *os.File { return f.ends[i] }

// all returns every descriptor the set holds, for the start to close once the child has its own.
func (f *fifoSet) all() []*os.File {
	var all []*os.File
	for _, e := range f.ends {
		if e != nil {
			all = append(all, e)
		}
	}
	return append(all, f.extra...)
}

func (f *fifoSet) remove() {
	for _, p := range f.paths {
		if p != "" {
			os.Remove(p)
		}
	}
}

// fifoStore is the agent's live tokens, in a private directory made at the first request.
type fifoStore struct {
	mu   sync.Mutex
	dir  string
	next int
	live map[string]*fifoSet
}

func newFifoStore() *fifoStore { return &fifoStore{live: map[string]*fifoSet{}} }

type fifosRequest struct {
	Streams []string `json:"streams"`
}

func (s *server) makeFifos(req request, f *frame) {
	if !s.noFDs(req, f) {
		return
	}
	r, ok := fields[fifosRequest](s, req)
	if !ok {
		return
	}
	token, paths, e := s.fifos.make(r.Streams)
	if e != nil {
		s.fail(req.id, e)
		return
	}
	s.ok(req.id, struct {
		Token string            `json:"token"`
		Paths map[string]string `json:"paths"`
	}{token, paths})
}

// make makes the named pipes of one token.
func (st *fifoStore) make(streams []string) (string, map[string]string, *replyError) {
	if len(streams) == 0 {
		return "", nil, errorf(codeBadRequest, "streams: want one or more of stdin, stdout, stderr")
	}
	var want [3]bool
	for _, name := range streams {
		i := -1
		for j, n := range streamNames {
			if n == name {
				i = j
			}
		}
		if i < 0 || want[i] {
			return "", nil, errorf(codeBadRequest, "streams: %q is not stdin, stdout or stderr, once each", name)
		}
		want[i] = true
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dir == "" {
		dir, err := localsock.MkdirPrivate("", "custody-agent-")
		if err != nil {
			return "", nil, errorf(codeStartFailed, "fifos: %v", err)
		}
		st.dir = dir
	}
	st.next++
	token := fmt.Sprintf("f%d", st.next)
	set := &fifoSet{}
	paths := map[string]string{}
	for i, w := range want {
		if !w {
			continue
		}
		p := filepath.Join(st.dir, fmt.Sprintf("%s-%d", token, i))
		set.paths[i] = p
		if err := set.open(i, p); err != nil {
			for _, f := range set.all() {
				f.Close()
			}
			set.remove()
			return "", nil, errorf(codeStartFailed, "fifos: %v", err)
		}
		paths[streamNames[i]] = p
	}
	set.timer = time.AfterFunc(fifoTTL, func() {
		if s := st.take(token); s != nil {
			for _, f := range s.all() {
				f.Close()
			}
		}
	})
	st.live[token] = set
	return token, paths, nil
}

// open makes the named pipe of stream i at p and opens the agent's side. A FIFO opened for
// writing without a reader fails (ENXIO) when non-blocking and blocks otherwise, so for stdout
// and stderr the agent first holds a read end of its own, until the start: the client's open for
// reading then finds a writer and does not block either. The child's side is made blocking again:
// O_NONBLOCK belongs to the open file, which the child shares.
func (f *fifoSet) open(i int, p string) error {
	if err := unix.Mkfifo(p, 0o600); err != nil {
		return &os.PathError{Op: "mkfifo", Path: p, Err: err}
	}
	if i > 0 {
		rfd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: p, Err: err}
		}
		f.extra = append(f.extra, os.NewFile(uintptr(rfd), p))
	}
	mode := unix.O_RDONLY
	if i > 0 {
		mode = unix.O_WRONLY
	}
	fd, err := unix.Open(p, mode|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return os.NewSyscallError("fcntl", err)
	}
	f.ends[i] = os.NewFile(uintptr(fd), p)
	return nil
}

// take withdraws a live token for its start: its nodes are removed, its descriptors are the
// caller's.
func (st *fifoStore) take(token string) *fifoSet {
	st.mu.Lock()
	defer st.mu.Unlock()
	set := st.live[token]
	if set == nil {
		return nil
	}
	delete(st.live, token)
	set.timer.Stop()
	set.remove()
	return set
}

// close withdraws every token and removes the directory.
func (st *fifoStore) close() {
	st.mu.Lock()
	tokens := make([]string, 0, len(st.live))
	for t := range st.live {
		tokens = append(tokens, t)
	}
	st.mu.Unlock()
	for _, t := range tokens {
		if set := st.take(t); set != nil {
			for _, f := range set.all() {
				f.Close()
			}
		}
	}
	st.mu.Lock()
	if st.dir != "" {
		os.RemoveAll(st.dir)
	}
	st.mu.Unlock()
}
