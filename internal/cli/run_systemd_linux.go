package cli

// custody run through a transient systemd service: where this process's cgroup is not the
// user's (an SSH session's root-owned session-N.scope), the user manager cannot move it into a
// delegated scope, but it can fork a service into one. custody run then starts custody agent in
// a transient service with Delegate=yes and has it start the child: the agent is the child's
// owner in custody's sense (its cgroup, its supervisor, its row), and custody run is the agent's
// client, so the child dies with custody run (the agent watches its client) and custody run
// with its own caller, as on every other path.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/backoff"
	"github.com/custody-dev/custody/internal/caller"
	"github.com/custody-dev/custody/internal/localsock"
	"github.com/custody-dev/custody/internal/sdunit"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/scope"
)

// agentUp bounds the wait for the agent's socket once the manager has started its service.
const agentUp = 10 * time.Second

// needsService reports whether custody run must start its child through an agent in a systemd
// service (see scope.ErrNeedsService).
func needsService() bool { return scope.NeedsService() != nil }

// serviceAgent is custody agent in a transient service, and custody run's connection to it.
type serviceAgent struct {
	unit string
	dir  string // the 0700 directory of its socket
	conn *net.UnixConn
	in   chan agentMsg // lines from the agent, until it hangs up
}

// agentMsg is what custody run reads of the agent's lines: replies and events.
type agentMsg struct {
	ID     *int        `json:"id"`
	OK     bool        `json:"ok"`
	Event  string      `json:"event"`
	PID    int         `json:"pid"`
	Code   *int        `json:"code"`
	Signal *int        `json:"signal"`
	Error  *agentError `json:"error"`
}

type agentError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// startServiceAgent asks the user manager for a transient service with Delegate=yes running
// custody agent on a socket in a new 0700 directory, and connects to it. The service is
// collected when the agent exits (CollectMode=inactive-or-failed), which it does once its client
// (this process) ends.
func startServiceAgent(ctx context.Context, o *runOptions) (_ *serviceAgent, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	led, err := ledger.Resolve(o.ledgerPath())
	if err != nil {
		return nil, err
	}
	dir, err := localsock.MkdirPrivate(os.Getenv("XDG_RUNTIME_DIR"), "custody-agent-")
	if err != nil {
		return nil, fmt.Errorf("run: socket directory: %w", err)
	}
	me, err := procid.Self()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	a := &serviceAgent{unit: fmt.Sprintf("custody-agent-%d-%d.service", me.PID, me.Start), dir: dir}
	sock := filepath.Join(dir, "agent.sock")
	// The agent waits for this process no longer than this process tries to connect: killed
	// before it connected, it would otherwise leave the service waiting for a client for ever.
	argv := []string{exe, "--ledger", led, "--install-root", o.installRootDir(), "agent", "--socket", sock,
		"--accept-within", agentUp.String(), "--grace", o.grace.String()}
	if name := o.tagEnvName(); name != "" {
		argv = append(argv[:1], append([]string{"--tag-env", name}, argv[1:]...)...)
	}
	askCtx, cancel := context.WithTimeout(ctx, agentUp)
	defer cancel()
	c, err := sdunit.Dial(askCtx)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer c.Close()
	if err := c.StartService(askCtx, a.unit, argv, os.Environ()); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer func() {
		if err != nil { // an agent with no client would wait for one for ever
			c.Stop(context.WithoutCancel(askCtx), a.unit)
			os.RemoveAll(dir)
		}
	}()
	// The manager answers once the agent exec'd (Type=exec); its socket comes a moment later.
	if _, err := backoff.Until(askCtx, func() (bool, error) {
		a.conn, err = localsock.Dial(sock)
		return err == nil, nil
	}); err != nil || a.conn == nil {
		return nil, fmt.Errorf("run: connect to the agent in %s: %v", a.unit, err)
	}
	a.in = make(chan agentMsg, 16)
	go a.read()
	if m, ok := <-a.in; !ok || m.Event != "hello" {
		a.conn.Close()
		return nil, fmt.Errorf("run: the agent in %s did not say hello", a.unit)
	}
	// Connected, the socket's name has served: the agent takes no other client. The directory
	// goes now rather than at this process's end, which a SIGKILL would skip, leaving it in the
	// user's runtime directory for ever.
	os.RemoveAll(dir)
	return a, nil
}

// read passes the agent's lines on until it hangs up.
func (a *serviceAgent) read() {
	defer close(a.in)
	r := bufio.NewReaderSize(a.conn, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var m agentMsg
		if json.Unmarshal(line, &m) == nil {
			a.in <- m
		}
	}
}

// send sends one request, with fds attached to its line.
func (a *serviceAgent) send(req any, fds ...int) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, _, err := a.conn.WriteMsgUnix(b, oob, nil)
	if err == nil && n < len(b) {
		_, err = a.conn.Write(b[n:])
	}
	return err
}

// close hangs up: the agent stops what is left of its children and exits, and the manager
// collects its service.
func (a *serviceAgent) close() {
	a.conn.Close()
	os.RemoveAll(a.dir)
}

// runInService is runRun's child started by the agent in a service: custody run forwards its
// signals to it and waits for its exit event; its own stdio are the child's.
func runInService(ctx context.Context, o *runOptions, path string, served *caller.Process) error {
	if o.grantEnv != "" {
		return fmt.Errorf("run: --grant-env through a systemd service: %w", errors.ErrUnsupported)
	}
	a, err := startServiceAgent(ctx, o)
	if err != nil {
		return err
	}
	defer a.close()
	cwd, _ := os.Getwd()
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	tagEnv, err := o.tagName()
	if err != nil {
		return err
	}
	start := map[string]any{"id": 1, "op": "start", "argv": append([]string{path}, o.argv[1:]...), "env": env,
		"cwd": cwd, "purpose": o.purpose, "grace": o.grace.Seconds(), "keep": o.keep, "tag_env": tagEnv,
		"stdio": []string{"fd", "fd", "fd"}}
	if err := a.send(start, 0, 1, 2); err != nil {
		return fmt.Errorf("run: ask the agent in %s: %w", a.unit, err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	pid := 0
	for {
		select {
		case m, ok := <-a.in:
			switch {
			case !ok:
				return fmt.Errorf("run: the agent in %s hung up", a.unit)
			case m.ID != nil && *m.ID == 1 && !m.OK:
				fmt.Fprintf(o.stderr, "custody: error: run: through %s: %s\n", a.unit, m.Error.Message)
				if m.Error.Code == "not-found" {
					return statusError{127}
				}
				return statusError{exitError}
			case m.ID != nil && *m.ID == 1:
				pid = m.PID
				if o.verbose {
					fmt.Fprintf(o.stderr, "custody: run: pid %d started by custody agent in %s\n", pid, a.unit)
				}
			case m.Event == "exit" && m.PID == pid && pid != 0:
				if m.Signal != nil {
					return statusError{exitCode(128 + *m.Signal)}
				}
				if m.Code != nil {
					return statusError{exitCode(*m.Code)}
				}
				return statusError{exitError}
			}
		case sig := <-sigs:
			if pid != 0 {
				a.send(map[string]any{"id": 2, "op": "signal", "pid": pid, "signal": int(sig.(unix.Signal))})
			}
		case <-ownerDone(served):
			sayOwnerEnded(o.stderr, "run", served, pid)
			return statusError{exitOwnerGone} // the hang-up stops the child's scope
		}
	}
}
