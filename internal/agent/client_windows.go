package agent

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"

	"github.com/custody-dev/custody/internal/winproc"
	"github.com/custody-dev/custody/procid"
)

// clientProcess is the agent's client: a handle on its process, taken at connect, through which
// the agent watches its end and duplicates handles from and into it.
type clientProcess struct {
	id      procid.ID
	h, wake windows.Handle
	done    chan struct{} // closed when the client has ended
	ended   chan struct{} // closed when the watch's thread has left its wait
}

// errNotClient: the process at the client end is not one the agent serves.
var errNotClient = errors.New("not a client of this user")

// openClient opens the process at pipe's client end and proves it: alive, created no later than
// connected (the moment ConnectNamedPipe returned), and of this user.
func openClient(pipe windows.Handle, connected uint64) (_ *clientProcess, err error) {
	var pid uint32
	if err := windows.GetNamedPipeClientProcessId(pipe, &pid); err != nil {
		return nil, os.NewSyscallError("GetNamedPipeClientProcessId", err)
	}
	h, _, err := winproc.Open(int(pid),
		windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.PROCESS_DUP_HANDLE, 0)
	if err != nil {
		return nil, fmt.Errorf("client pid %d: %w: %w", pid, err, errNotClient)
	}
	defer func() {
		if err != nil {
			windows.CloseHandle(h)
		}
	}()
	if ev, err := windows.WaitForSingleObject(h, 0); err != nil || ev == windows.WAIT_OBJECT_0 {
		return nil, fmt.Errorf("client pid %d exited: %w", pid, errNotClient)
	}
	start, err := winproc.Start(h)
	if err != nil {
		return nil, err
	}
	if start > connected {
		return nil, fmt.Errorf("client pid %d was created after its connect: its pid was reused: %w", pid, errNotClient)
	}
	if err := sameUser(h); err != nil {
		return nil, fmt.Errorf("client pid %d: %w: %w", pid, err, errNotClient)
	}
	wake, err := windows.CreateEvent(nil, 1, 0, nil)
	if err != nil {
		return nil, os.NewSyscallError("CreateEvent", err)
	}
	c := &clientProcess{id: procid.ID{PID: int(pid), Start: start}, h: h, wake: wake, done: make(chan struct{}), ended: make(chan struct{})}
	go c.watch()
	return c, nil
}

// sameUser refuses a process of another user: on Windows the pipe's DACL already does, but Wine
// does not enforce it.
func sameUser(h windows.Handle) error {
	var tok windows.Token
	if err := windows.OpenProcessToken(h, windows.TOKEN_QUERY, &tok); err != nil {
		return os.NewSyscallError("OpenProcessToken", err)
	}
	defer tok.Close()
	theirs, err := tok.GetTokenUser()
	if err != nil {
		return os.NewSyscallError("GetTokenInformation", err)
	}
	mine, err := userSID()
	if err != nil {
		return err
	}
	if !theirs.User.Sid.Equals(mine) {
		return fmt.Errorf("user %v, not this user (%v)", theirs.User.Sid, mine)
	}
	return nil
}

// watch waits for the client's exit or the wake.
func (c *clientProcess) watch() {
	defer close(c.ended)
	ev, err := windows.WaitForMultipleObjects([]windows.Handle{c.h, c.wake}, false, windows.INFINITE)
	if err == nil && ev == windows.WAIT_OBJECT_0 {
		close(c.done)
	}
}

func (c *clientProcess) close() error {
	windows.SetEvent(c.wake)
	<-c.ended
	return errors.Join(windows.CloseHandle(c.h), windows.CloseHandle(c.wake))
}
