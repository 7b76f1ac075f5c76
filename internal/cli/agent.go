package cli

import (
	"context"
	"os"
	"runtime"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody/internal/agent"
)

type agentOptions struct {
	*globals
	fd     int
	socket string
	grace  time.Duration
	within time.Duration // --accept-within
}

const agentHelp = `Serve one client as its owner: a program in any language drives this agent over a local socket
with JSON lines (the protocol is docs/agent.md), and the agent starts each child as custody run
would: born in its own scope, covered by the owner-death supervisor before it runs, tagged and
recorded in the ledger. The client passes its descriptors for the child's standard streams, or
asks for pipes, which come back as descriptors, or for named pipes.

With --fd N the client is the agent's parent, connected through descriptor N, one end of a
socketpair the parent made. With --socket PATH the agent listens at PATH (its directory must be
yours and not writable by others), prints "ready PATH" on standard output, and serves the first
process of your user that connects; every later connection is refused. With --accept-within D
it exits (status 3) when no client has connected within D: a starter that died before it
connected leaves no agent waiting for ever.

On Windows, --socket names a named pipe, \\.\pipe\NAME: the agent makes it with a DACL that
admits you alone and a single instance (a second client's open fails with ERROR_PIPE_BUSY),
prints "ready NAME", and serves the process at its client end, proven at its connect; the
streams travel as handles duplicated between the processes. --fd is refused there.

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
  3   the owner was already gone when the agent started, or (--accept-within) never connected;
      no child was started`

func newAgent(g *globals) *cli.Command {
	o := &agentOptions{globals: g, fd: -1}
	return &cli.Command{
		Name:        "agent",
		Usage:       "Own children for a program in any language, driven over a socket",
		UsageText:   "custody agent (--fd N | --socket PATH [--accept-within D]) [--grace D]",
		Description: agentHelp,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "fd", Value: -1, Destination: &o.fd,
				Usage: "serve the client on this inherited socket descriptor"},
			&cli.StringFlag{Name: "socket", Destination: &o.socket,
				Usage: "listen at this path and serve the first client of this user"},
			&cli.DurationFlag{Name: "accept-within", Destination: &o.within,
				Usage: "with --socket: exit (status 3) if no client has connected within this time"},
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
	case o.within < 0, o.within > 0 && o.socket == "":
		return usagef("agent: --accept-within takes a duration above zero, with --socket")
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
	oneProcessor()
	return serveAgent(o, cfg)
}

// oneProcessor runs the agent's goroutines on one processor (GOMAXPROCS 1) unless $GOMAXPROCS
// says otherwise. The agent's work is a chain of short handoffs between goroutines (the
// request's reader, the start, the exit's watch, the writer of the event), and with more than one
// processor the runtime wakes an idle one's thread for each goroutine it makes runnable: a futex
// wake-up, on a virtual machine an interprocessor interrupt, on the path of every start and exit
// (the Python client's start to exit of /bin/true, 1.64–1.84 × subprocess's with two processors,
// 1.61–1.66 × with one, on a 2-CPU machine). What the agent waits for, it waits for on the
// runtime's poller (sockets, pidfds), which holds no processor, or in a system call, whose
// processor the runtime's monitor hands to another thread once it has blocked for 20 µs. The
// variable itself is not set: the children inherit the user's environment as it was.
func oneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
