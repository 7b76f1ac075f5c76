package custody

// The giver's named pipe. API facts relied on:
//
//	CreateNamedPipe      FILE_FLAG_FIRST_PIPE_INSTANCE fails when the name exists already, so a
//	                     pipe made under the name by anyone before the giver is never taken for
//	                     the giver's; PIPE_REJECT_REMOTE_CLIENTS refuses other machines
//	a pipe name          exists while any instance of it does: a client that opens it when none
//	                     is left gets ERROR_FILE_NOT_FOUND, as for a giver that is gone. So the
//	                     giver makes the next instance as soon as a client takes the current one
//	                     (two at most: the one served, the one waiting), and a receiver coming
//	                     after a refused one never finds the name missing
//	ConnectNamedPipe     overlapped: completes when a client opens the instance (or reports
//	                     ERROR_PIPE_CONNECTED when one did before the call, ERROR_NO_DATA when
//	                     one opened it and closed it again before the call)
//	CreateFile on a pipe ERROR_FILE_NOT_FOUND when no instance exists (the giver is gone or has
//	                     stopped listening), ERROR_PIPE_BUSY while the one instance is taken,
//	                     ERROR_ACCESS_DENIED when the DACL refuses the caller

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/custody-dev/custody/internal/winproc"
	"golang.org/x/sys/windows"
)

const pipePrefix = `\\.\pipe\custody-grant-`

// pipeInstances: the instance being served and the one waiting for the next client.
const pipeInstances = 2

// pipeBusyWait bounds how long a receiver waits for the giver's one instance while another
// connection (a refused one: wrong secret, another user) holds it.
const pipeBusyWait = 5 * time.Second

// pipeListener serves the giver's pipe, one instance at a time.
type pipeListener struct {
	name   string
	sa     *windows.SecurityAttributes
	closed windows.Handle // manual-reset event set by Close: wakes a pending accept

	mu        sync.Mutex
	next      windows.Handle // the instance waiting for a client; 0 when none
	closeOnce sync.Once
}

// pipeConn is one end of a connected instance.
type pipeConn struct {
	*os.File
	h windows.Handle // the File's handle, for the pipe's queries; valid until Close
}

// listenPipe creates the pipe under a new random name, open to this user alone.
func listenPipe() (_ *pipeListener, err error) {
	sa, err := userOnly()
	if err != nil {
		return nil, err
	}
	var b [16]byte
	rand.Read(b[:])
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		return nil, os.NewSyscallError("CreateEvent", err)
	}
	l := &pipeListener{name: pipePrefix + hex.EncodeToString(b[:]), sa: sa, closed: ev}
	if l.next, err = l.instance(windows.FILE_FLAG_FIRST_PIPE_INSTANCE); err != nil {
		windows.CloseHandle(ev)
		return nil, err
	}
	// The event outlives Close, which cannot know whether an accept still waits on it: it is
	// closed once nothing can reach the listener, so a giver minting grants leaks no handle.
	runtime.AddCleanup(l, func(ev windows.Handle) { windows.CloseHandle(ev) }, ev)
	return l, nil
}

// userOnly returns security attributes whose DACL grants this process's user, alone, full access.
func userOnly() (*windows.SecurityAttributes, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("token user: %w", err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:P(A;;GA;;;" + u.User.Sid.String() + ")")
	if err != nil {
		return nil, fmt.Errorf("pipe security descriptor: %w", err)
	}
	return &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}, nil
}

// instance creates an instance of the pipe, overlapped.
func (l *pipeListener) instance(flags uint32) (windows.Handle, error) {
	name, err := windows.UTF16PtrFromString(l.name)
	if err != nil {
		return 0, err
	}
	h, err := windows.CreateNamedPipe(name,
		windows.PIPE_ACCESS_DUPLEX|windows.FILE_FLAG_OVERLAPPED|flags,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS,
		pipeInstances, maxLine, maxLine, 0, l.sa)
	if err != nil {
		return 0, os.NewSyscallError("CreateNamedPipe", err)
	}
	return h, nil
}

// accept waits for a client on a fresh instance, or for Close. A client that opened the
// instance and closed it again before the giver served it (a receiver that refused the giver)
// is no connection: its instance is dropped and the next one waits.
func (l *pipeListener) accept() (grantConn, error) {
	for {
		h, err := l.take()
		if err != nil {
			return nil, err
		}
		err = l.connect(h)
		if err == nil {
			l.prepare()
			return newPipeConn(h, l.name), nil
		}
		if clientLeft(err) {
			l.prepare() // before the close: the name must not vanish in between
			windows.CloseHandle(h)
			continue
		}
		windows.CloseHandle(h)
		return nil, err
	}
}

// clientLeft reports a connect that failed because its client had already closed its end.
func clientLeft(err error) bool {
	return errors.Is(err, windows.ERROR_NO_DATA) || errors.Is(err, windows.ERROR_BROKEN_PIPE) ||
		errors.Is(err, windows.ERROR_PIPE_NOT_CONNECTED)
}

// prepare makes the instance the next client will open, unless closed. Failing, it leaves take
// to make it.
func (l *pipeListener) prepare() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev, _ := windows.WaitForSingleObject(l.closed, 0); ev == windows.WAIT_OBJECT_0 || l.next != 0 {
		return
	}
	if h, err := l.instance(0); err == nil {
		l.next = h
	}
}

// take returns the waiting instance, or a new one.
func (l *pipeListener) take() (windows.Handle, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev, _ := windows.WaitForSingleObject(l.closed, 0); ev == windows.WAIT_OBJECT_0 {
		return 0, net.ErrClosed
	}
	if h := l.next; h != 0 {
		l.next = 0
		return h, nil
	}
	return l.instance(0)
}

// connect waits until a client opens h, or Close.
func (l *pipeListener) connect(h windows.Handle) error {
	ev, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		return os.NewSyscallError("CreateEvent", err)
	}
	defer windows.CloseHandle(ev)
	ov := windows.Overlapped{HEvent: ev}
	switch err := windows.ConnectNamedPipe(h, &ov); err {
	case nil, windows.ERROR_PIPE_CONNECTED:
		return nil
	case windows.ERROR_IO_PENDING:
	default:
		return os.NewSyscallError("ConnectNamedPipe", err)
	}
	got, err := windows.WaitForMultipleObjects([]windows.Handle{ev, l.closed}, false, windows.INFINITE)
	if err == nil && got == windows.WAIT_OBJECT_0 {
		var n uint32
		if err := windows.GetOverlappedResult(h, &ov, &n, false); err != nil {
			return os.NewSyscallError("ConnectNamedPipe", err)
		}
		return nil
	}
	// Closed (or the wait failed): the operation must end before ov and ev go away.
	windows.CancelIoEx(h, &ov)
	var n uint32
	windows.GetOverlappedResult(h, &ov, &n, true)
	return net.ErrClosed
}

// Close stops accepting: a pending accept returns net.ErrClosed, and the name is freed.
func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() {
		windows.SetEvent(l.closed)
		l.mu.Lock()
		if l.next != 0 {
			windows.CloseHandle(l.next)
			l.next = 0
		}
		l.mu.Unlock()
	})
	return nil
}

func newPipeConn(h windows.Handle, name string) *pipeConn {
	return &pipeConn{File: os.NewFile(uintptr(h), name), h: h}
}

// dialPipe opens the giver's pipe, waiting while its one instance is busy.
func dialPipe(name string) (*pipeConn, error) {
	if len(name) <= len(pipePrefix) || name[:len(pipePrefix)] != pipePrefix {
		return nil, fmt.Errorf("%w: %q is not a custody grant pipe", ErrGrantMalformed, name)
	}
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGrantMalformed, err)
	}
	deadline := time.Now().Add(pipeBusyWait)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		// SECURITY_IDENTIFICATION: the giver may learn who the receiver is, not act as it.
		h, err := windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil, windows.OPEN_EXISTING,
			windows.FILE_FLAG_OVERLAPPED|windows.SECURITY_SQOS_PRESENT|windows.SECURITY_IDENTIFICATION, 0)
		switch {
		case err == nil:
			return newPipeConn(h, name), nil
		case err == windows.ERROR_PIPE_BUSY && time.Now().Before(deadline):
			time.Sleep(delay) // another connection holds the one instance; there is nothing to wait on
			continue
		case err == windows.ERROR_ACCESS_DENIED:
			return nil, fmt.Errorf("%w: another user's grant: %v", ErrGrantRefused, err)
		}
		return nil, fmt.Errorf("%w: its giver is gone or the grant was used: %v", ErrGrantRefused, err)
	}
}

// clientPID returns the PID of the process that opened the pipe, as the pipe recorded it.
func (c *pipeConn) clientPID() (int, error) {
	var pid uint32
	if err := windows.GetNamedPipeClientProcessId(c.h, &pid); err != nil {
		return 0, fmt.Errorf("peer pid: %w", os.NewSyscallError("GetNamedPipeClientProcessId", err))
	}
	return int(pid), nil
}

// serverPID returns the PID of the process that created the pipe.
func (c *pipeConn) serverPID() (int, error) {
	var pid uint32
	if err := windows.GetNamedPipeServerProcessId(c.h, &pid); err != nil {
		return 0, fmt.Errorf("giver's pid: %w", os.NewSyscallError("GetNamedPipeServerProcessId", err))
	}
	return int(pid), nil
}

// sameUser returns why pid is refused: its user cannot be read, or is not this process's.
func sameUser(pid int) error {
	theirs, err := userOf(pid)
	if err != nil {
		return fmt.Errorf("the user of pid %d: %w", pid, err)
	}
	mine, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("token user: %w", err)
	}
	if !windows.EqualSid(theirs.User.Sid, mine.User.Sid) {
		return fmt.Errorf("the grant is %s's, not %s's", mine.User.Sid, theirs.User.Sid)
	}
	return nil
}

// userOf reads the user of pid's process token.
func userOf(pid int) (*windows.Tokenuser, error) {
	h, _, err := winproc.Open(pid, windows.PROCESS_QUERY_LIMITED_INFORMATION, 0)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(h)
	var tok windows.Token
	if err := windows.OpenProcessToken(h, windows.TOKEN_QUERY, &tok); err != nil {
		return nil, os.NewSyscallError("OpenProcessToken", err)
	}
	defer tok.Close()
	return tok.GetTokenUser()
}
