package agent

// Windows facts relied on:
//
//	CreateNamedPipe, FILE_FLAG_FIRST_PIPE_INSTANCE   fails if the name exists already: nobody can
//	                          have made the pipe first and stand in for the agent
//	nMaxInstances 1           a second client's CreateFile fails with ERROR_PIPE_BUSY: one client
//	PIPE_REJECT_REMOTE_CLIENTS   a connection over the network (SMB) is refused
//	D:P(A;;GA;;;<user SID>)   the DACL admits the user alone; P keeps inherited ACEs out. Wine
//	                          stores the descriptor but checks no access against it (every Wine
//	                          process is one Unix user), so the token check at connect below is
//	                          what refuses another user there
//	GetNamedPipeClientProcessId   the PID the kernel recorded at the client's connect: it may name
//	                          a recycled PID once the client has exited, which a creation time
//	                          later than the connect gives away
//	PROCESS_DUP_HANDLE        lets the agent duplicate handles from and into the client

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/custody-dev/custody/internal/winproc"
	"github.com/custody-dev/custody/procid"
)

// pipePrefix is where local named pipes live.
const pipePrefix = `\\.\pipe\`

// Socket is the agent's named pipe before its client connects: one instance, so that it serves
// one client and the OS refuses every other.
type Socket struct {
	name string
	h    windows.Handle
}

// Listen makes the named pipe name (\\.\pipe\NAME) with a DACL that admits the calling user alone.
func Listen(name string) (_ *Socket, err error) {
	if !strings.HasPrefix(strings.ToLower(name), pipePrefix) || len(name) == len(pipePrefix) {
		return nil, fmt.Errorf(`agent: --socket %q: not a named pipe (\\.\pipe\NAME)`, name)
	}
	sid, err := userSID()
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:P(A;;GA;;;" + sid.String() + ")")
	if err != nil {
		return nil, fmt.Errorf("agent: security descriptor: %w", err)
	}
	sa := &windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(*sa))
	n16, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, fmt.Errorf("agent: --socket %q: %w", name, err)
	}
	h, err := windows.CreateNamedPipe(n16,
		windows.PIPE_ACCESS_DUPLEX|windows.FILE_FLAG_FIRST_PIPE_INSTANCE|windows.FILE_FLAG_OVERLAPPED,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS,
		1, 64<<10, 64<<10, 0, sa)
	if err != nil {
		return nil, fmt.Errorf("agent: %s: %w", name, os.NewSyscallError("CreateNamedPipe", err))
	}
	return &Socket{name: name, h: h}, nil
}

// Pipe is the connected pipe: the agent's connection to its client, and the client's process.
type Pipe struct{ c *conn }

// ID returns the client's incarnation, proven at its connect.
func (p *Pipe) ID() procid.ID { return p.c.client.id }

// Done returns a channel closed once the client's process has ended, by any cause.
func (p *Pipe) Done() <-chan struct{} { return p.c.client.done }

// Accept waits for the client and proves it: the process at the pipe's client end, opened
// through a handle, alive, created before its connect (so not a process that took a dead
// client's PID), and of this user. A client that fails the proof is disconnected, and the wait
// goes on. Once accepted, the pipe's one instance is the client's: every other client is refused
// by the OS (ERROR_PIPE_BUSY).
func (s *Socket) Accept() (*Pipe, error) {
	for {
		if err := connectPipe(s.h); err != nil {
			return nil, fmt.Errorf("agent: %s: %w", s.name, err)
		}
		var connected windows.Filetime
		windows.GetSystemTimeAsFileTime(&connected)
		cp, err := openClient(s.h, winproc.Ticks(connected))
		if err != nil {
			if errors.Is(err, errNotClient) {
				windows.DisconnectNamedPipe(s.h)
				continue
			}
			return nil, fmt.Errorf("agent: %s: %w", s.name, err)
		}
		f := os.NewFile(uintptr(s.h), s.name)
		s.h = 0
		return &Pipe{c: &conn{f: f, buf: make([]byte, 64<<10), client: cp}}, nil
	}
}

// connectPipe waits for a client to open the pipe.
func connectPipe(h windows.Handle) error {
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		return os.NewSyscallError("CreateEvent", err)
	}
	defer windows.CloseHandle(ev)
	ov := &windows.Overlapped{HEvent: ev}
	err = windows.ConnectNamedPipe(h, ov)
	switch err {
	case nil, windows.ERROR_PIPE_CONNECTED:
		return nil
	case windows.ERROR_IO_PENDING:
		var n uint32
		if err := windows.GetOverlappedResult(h, ov, &n, true); err != nil {
			return os.NewSyscallError("ConnectNamedPipe", err)
		}
		return nil
	}
	return os.NewSyscallError("ConnectNamedPipe", err)
}

// Close closes the pipe if no client took it.
func (s *Socket) Close() error {
	if s.h == 0 {
		return nil
	}
	err := windows.CloseHandle(s.h)
	s.h = 0
	return err
}

// FromFD is not served on Windows: use --socket. An inherited handle would be the client's
// connection, but an anonymous pipe (CreatePipe) is synchronous, and a read on it blocked in the
// agent could not be ended when the client's process ends while another process holds a copy of
// its end.
func FromFD(fd int) (*Pipe, error) {
	return nil, fmt.Errorf(`agent: --fd on windows: %w (use --socket \\.\pipe\NAME)`, errors.ErrUnsupported)
}

// Serve serves the client at the other end of p until it ends: until p reaches end of file (or
// fails), or cfg.OwnerDone is closed. Then it stops every child still held, concurrently, each with
// its own grace, drops their rows, closes p and returns. Its error is what the final stop could
// not do; a child whose exit could not be proven keeps its row, for reap.
func Serve(p *Pipe, cfg Config) error { return serveConn(p.c, cfg) }

// userSID is the calling process's user.
func userSID() (*windows.SID, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, os.NewSyscallError("GetTokenInformation", err)
	}
	return tu.User.Sid, nil
}
