package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/internal/agent"
	"github.com/custody-dev/custody/internal/caller"
	"github.com/custody-dev/custody/internal/localsock"
	"github.com/custody-dev/custody/procid"
)

type agentOptions struct {
	*globals
	fd     int
	socket string
	grace  time.Duration
}

const agentHelp = `Serve one client as its owner: a program in any language drives this agent over a local socket
with JSON lines (the protocol is docs/agent.md), and the agent starts each child as custody run
would: born in its own scope, covered by the owner-death supervisor before it runs, tagged and
recorded in the ledger. The client passes its descriptors for the child's standard streams, or
asks for pipes, which come back as descriptors, or for named pipes.

With --fd N the client is the agent's parent, connected through descriptor N, one end of a
socketpair the parent made. With --socket PATH the agent listens at PATH (its directory must be
yours and not writable by others), prints "ready PATH" on standard output, and serves the first
process of your user that connects; every later connection is refused.

The agent's owner is its client: when the connection reaches end of file (or the client process
ends), the agent stops every child it holds, concurrently, each with its grace (SIGTERM, the
grace, SIGKILL), drops their rows and exits. If the agent itself dies, by any cause, its
supervisor stops the children's scopes. Nothing the client sends ends the agent otherwise: bad
input gets an error reply. SIGINT and SIGTERM do not end it either: its owner does.

EXIT STATUS
  0   the owner ended and every child was stopped
  1   the agent could not set up (the socket, the ledger, the owner's handle), or a child's stop
      could not be proven at the end (its row stays, for reap)
  2   bad flags or arguments
  3   the owner was already gone when the agent started; no child was started`

func newAgent(g *globals) *cli.Command {
	o := &agentOptions{globals: g, fd: -1}
	return &cli.Command{
		Name:        "agent",
		Usage:       "Own children for a program in any language, driven over a socket",
		UsageText:   "custody agent (--fd N | --socket PATH) [--grace D]",
		Description: agentHelp,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "fd", Value: -1, Destination: &o.fd,
				Usage: "serve the client on this inherited socket descriptor"},
			&cli.StringFlag{Name: "socket", Destination: &o.socket,
				Usage: "listen at this path and serve the first client of this user"},
			graceFlag(&o.grace, ", the default of every start and of the final stop"),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := noArgs(ctx, cmd); err != nil {
				return err
			}
			return runAgent(ctx, o)
		},
	}
}

// exitAgentOwnerGone is agent's status for an owner already gone at its start.
const exitAgentOwnerGone exitCode = 3

func runAgent(_ context.Context, o *agentOptions) error {
	switch {
	case (o.fd >= 0) == (o.socket != ""):
		return usagef("agent: give exactly one of --fd N and --socket PATH")
	case o.fd >= 0 && o.fd <= 2:
		return usagef("--fd %d: a standard stream is not the client's socket", o.fd)
	}
	tagEnv, err := o.tagName()
	if err != nil {
		return err
	}
	l, err := o.open()
	if err != nil {
		return err
	}
	cfg := agent.Config{Ledger: l, Install: o.install(), TagEnv: tagEnv, Grace: o.grace, Version: version(),
		Stderr: o.stderr}
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
		if conn, cred, err = sock.Accept(); err != nil {
			return err
		}
		if owner, err = caller.Open(cred.PID); err != nil {
			// A client that started after the agent cannot be proven by its start (see
			// caller.Open); its connection's end of file still ends the agent.
			fmt.Fprintf(o.stderr, "custody: warning: agent: client pid %d is watched through its connection alone: %v\n",
				cred.PID, err)
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
