//go:build unix

package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/custody-dev/custody/internal/agent"
	"github.com/custody-dev/custody/internal/caller"
	"github.com/custody-dev/custody/internal/localsock"
	"github.com/custody-dev/custody/procid"
)

// serveAgent serves the client on its socket: the inherited descriptor, or the first connection.
func serveAgent(o *agentOptions, cfg agent.Config) (err error) {
	// The client's end often closes the pipe stderr is: a warning written then must fail with
	// EPIPE, not kill the agent (SIGPIPE) before it has stopped the children.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	var conn *net.UnixConn
	var owner *caller.Process
	if o.fd >= 0 {
		if owner, err = agentParent(); err != nil {
			return err
		}
		if conn, err = agent.FromFD(o.fd); err != nil {
			return err
		}
	} else {
		sock, err := agent.Listen(o.socket)
		if err != nil {
			return err
		}
		defer sock.Close()
		fmt.Fprintf(o.stdout, "ready %s\n", o.socket)
		var cred localsock.Cred
		if conn, cred, err = sock.Accept(o.within); errors.Is(err, agent.ErrNoClient) {
			return codedError{exitAgentOwnerGone, fmt.Errorf("%w; nothing was started", err)}
		} else if err != nil {
			return err
		}
		if owner, err = caller.Open(cred.PID); err != nil {
			// A client that started after the agent cannot be proven by its start (see
			// caller.Open), which says so as of a reused PID; its connection's end of file still
			// ends the agent.
			why := err.Error()
			if errors.Is(err, procid.ErrReused) {
				why = "it started after the agent, so its start cannot prove it"
			}
			fmt.Fprintf(o.stderr, "custody: warning: agent: client pid %d is watched through its connection alone: %s\n",
				cred.PID, why)
			owner = nil
		}
	}
	if owner != nil {
		defer owner.Close()
		cfg.OwnerDone = owner.Done()
		id := owner.ID()
		cfg.Caller = &id
	}
	return agent.Serve(conn, cfg)
}

// agentParent takes the proven handle on the agent's parent, its client with --fd; nil when
// there is none to serve (PID 1 of a namespace), and exit status 3 when it is gone already.
func agentParent() (*caller.Process, error) {
	p, err := caller.Parent()
	switch {
	case errors.Is(err, caller.ErrNoParent):
		return nil, nil
	case errors.Is(err, procid.ErrGone):
		return nil, codedError{exitAgentOwnerGone, fmt.Errorf("agent: the client (the parent) has exited already; nothing was started")}
	case err != nil:
		return nil, fmt.Errorf("agent: %w", err)
	}
	return p, nil
}
