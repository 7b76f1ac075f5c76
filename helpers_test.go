package custody_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/supervise"
	"github.com/custody-dev/custody/tag"
)

// The helpers every OS's tests share: the test binary re-executed as an owned worker, and the
// owner a test starts its workers through.

func TestMain(m *testing.M) {
	custody.Init()
	testproc.Register("worker", helperWorker)
	testproc.Register("owner", helperOwner)
	testproc.Main(m)
}

// helperWorker is an owned child. It prints "tag <spawn tag>", then "ready <pid> <start>" for
// itself and, with -grandchild, for a worker it starts first (born into its scope: its process
// group, cgroup or job): "ready 4242 123 4243 125". With -slow it exits a second after SIGTERM
// (Unix; the handler is in place before the first line) rather than at once; with -exit N it
// exits with N once ready; otherwise it lives until stdin, its lifeline, which its grandchild
// shares, closes. With $WORKER_RAN set, it first creates that file.
func helperWorker(args []string) int {
	if ran := os.Getenv("WORKER_RAN"); ran != "" {
		os.WriteFile(ran, nil, 0o600)
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	grandchild := fs.Bool("grandchild", false, "start a worker below this one")
	slow := fs.Bool("slow", false, "exit a second after SIGTERM")
	exit := fs.Int("exit", -1, "exit with this code once ready")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *slow {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() { <-c; time.Sleep(time.Second); os.Exit(0) }()
	}
	self, err := procid.Self()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	report := fmt.Sprintf("ready %d %d", self.PID, self.Start)
	var g *exec.Cmd
	if *grandchild {
		var line string
		if g, line, err = startWorker(exec.Command(os.Args[0])); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		report += " " + line
	}
	fmt.Println("tag", os.Getenv(tag.DefaultEnv))
	fmt.Println(report)
	if *exit >= 0 {
		return *exit
	}
	io.Copy(io.Discard, os.Stdin)
	if g != nil {
		g.Wait()
	}
	return 0
}

// helperOwner owns the children ownedTree returns (per OS) through a [custody.Owner] recording
// in the ledger args[0], and prints "ready <pid> <start> …" with the incarnation of every process
// it owns (each child's and its descendants', as each child's ready line says), then "supervisor
// <pid>" (0 where the job is the cover). Each change of its supervisor's coverage prints "lost
// <why>", or "covered <supervisor pid>" when it comes back. It lives until its stdin closes or
// it is killed.
func helperOwner(args []string) int {
	sup := &supervise.Client{Grace: time.Second}
	sup.Notify = func(lost error) {
		if lost != nil {
			fmt.Println("lost", lost)
		} else {
			fmt.Println("covered", sup.PID())
		}
	}
	o := &custody.Owner{Ledger: ledger.Open(args[0]), Supervisor: sup}
	report := "ready"
	for _, cmd := range ownedTree() {
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		if _, err := o.Start(context.Background(), cmd, custody.StartOptions{Purpose: "serve"}); err != nil {
			fmt.Println("error", err)
			return 1
		}
		f, _ := readyFields(bufio.NewScanner(out))
		if f == nil {
			fmt.Println("error: a child said no ready line")
			return 1
		}
		report += " " + strings.Join(f[1:], " ")
	}
	fmt.Println(report)
	fmt.Println("supervisor", o.Supervisor.PID())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// startWorker starts cmd, a worker sharing this process's stdin and stderr (the helper variable
// is inherited), and returns what follows "ready " on its ready line.
func startWorker(cmd *exec.Cmd) (*exec.Cmd, string, error) {
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	if f, _ := readyFields(bufio.NewScanner(out)); f != nil {
		return cmd, strings.Join(f[1:], " "), nil
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, "", fmt.Errorf("worker %v said no ready line", cmd.Args)
}

// readyFields reads a worker's lines (see helperWorker) up to its ready line, and returns that
// line's fields ("ready", pid, start, and the grandchild's) and the worker's spawn tag; nil when
// the worker's output ended first.
func readyFields(sc *bufio.Scanner) (ready []string, spawnTag string) {
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "tag "); ok {
			spawnTag = v
		}
		if strings.HasPrefix(sc.Text(), "ready ") {
			return strings.Fields(sc.Text()), spawnTag
		}
	}
	return nil, spawnTag
}

func ledgerPath(t *testing.T) string { return filepath.Join(testproc.TempDir(t), "spawn-ledger.json") }

// newOwner returns an owner recording in a ledger of its own and stamping the default tag
// variable, whatever CUSTODY_TAG_ENV says, covered by a supervisor that gives a second's grace
// (Unix; Windows has the job). Both are closed when the test ends: the owner first, before the
// ledger's directory is removed, since a child that ended is released in the background (its
// row dropped, a write in that directory) and Close waits for that.
func newOwner(t *testing.T) *custody.Owner {
	sup := &supervise.Client{Grace: time.Second}
	t.Cleanup(func() { sup.Close() })
	o := &custody.Owner{Ledger: ledger.Open(ledgerPath(t)), TagEnv: tag.DefaultEnv, Supervisor: sup}
	t.Cleanup(func() { o.Close() })
	return o
}
