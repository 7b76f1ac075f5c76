// Command benchagent is the floor that the clients' benchmarks set beside `custody agent`: a
// process that speaks as much of the agent's protocol as a bare start needs (its hello, a start's
// reply, the exit event) over the socket a client hands it, and starts each child with a plain
// exec.Cmd, its streams on the null device. No scope, no cover, no ledger row, no supervisor:
// what is left is what any helper process between a client and its children costs (the request's
// and the event's trips through the socket, the wake-ups of both processes' threads, a Go
// program's start of a child), which no work of custody's can take away. Its arm in a benchmark
// says how much of custody's time is custody's own.
//
//	go build -o /tmp/benchagent ./internal/benchagent
//	python3 clients/python/bench.py --floor /tmp/benchagent
//
// It is run as the agent is, `benchagent agent --fd N` (every argument but the last is ignored),
// with the agent's GOMAXPROCS of one unless $GOMAXPROCS is set. Any request that is not a start
// is refused.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
)

func main() {
	if err := serve(); err != nil {
		fmt.Fprintln(os.Stderr, "benchagent:", err)
		os.Exit(1)
	}
}

func serve() error {
	if os.Getenv("GOMAXPROCS") == "" { // as custody agent runs
		runtime.GOMAXPROCS(1)
	}
	if len(os.Args) < 2 {
		return fmt.Errorf("usage: benchagent [agent] --fd N")
	}
	fd, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if err != nil {
		return fmt.Errorf("the last argument is the socket's descriptor: %w", err)
	}
	c, err := net.FileConn(os.NewFile(uintptr(fd), "socket"))
	if err != nil {
		return err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	send := func(v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		c.Write(append(b, '\n'))
	}
	send(map[string]any{"event": "hello", "protocol": 1, "capabilities": []string{"fds", "signal", "stop"},
		"max_line": 1 << 20, "containment": "none"})
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil // the client hung up
		}
		go func() {
			var req struct {
				ID   json.RawMessage `json:"id"`
				Op   string          `json:"op"`
				Argv []string        `json:"argv"`
			}
			if json.Unmarshal(line, &req) != nil || req.Op != "start" || len(req.Argv) == 0 {
				send(map[string]any{"id": req.ID, "ok": false,
					"error": map[string]any{"code": "unknown-op", "message": "benchagent serves bare starts only"}})
				return
			}
			cmd := &exec.Cmd{Path: req.Argv[0], Args: req.Argv, Stdin: null, Stdout: null, Stderr: null}
			if err := cmd.Start(); err != nil {
				send(map[string]any{"id": req.ID, "ok": false,
					"error": map[string]any{"code": "start-failed", "message": err.Error()}})
				return
			}
			send(map[string]any{"id": req.ID, "ok": true, "pid": cmd.Process.Pid})
			err := cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			send(map[string]any{"event": "exit", "pid": cmd.Process.Pid, "code": code})
		}()
	}
}
