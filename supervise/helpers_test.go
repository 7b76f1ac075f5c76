//go:build linux || darwin

package supervise_test

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/stop"
	"github.com/custody-dev/custody/supervise"
	"golang.org/x/sys/unix"
)

func init() {
	testproc.Register("child", helperChild)
	testproc.Register("owner", helperOwner)
	testproc.Register("die-young", helperDieYoung)
	testproc.Register("supervise-cli", helperSuperviseCLI)
}

// helperChild is a worker: it reports "ready <pid> <start>" (after its grandchild's, with
// -grandchild), closes stdout, and blocks reading stdin, its lifeline, until EOF.
func helperChild(args []string) int {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	grandchild := fs.Bool("grandchild", false, "start a grandchild in this process group first")
	ignoreTerm := fs.Bool("ignore-term", false, "ignore SIGTERM: only SIGKILL ends it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if *grandchild {
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = os.Environ() // the same helper name: a child without -grandchild
		cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "grandchild:", err)
			return 1
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			fmt.Fprintln(os.Stderr, "grandchild:", err)
			return 1
		}
		fmt.Print(line)
		go cmd.Wait()
	}
	self, err := procid.Self()
	if err != nil {
		fmt.Fprintln(os.Stderr, "self:", err)
		return 1
	}
	fmt.Printf("ready %d %d\n", self.PID, self.Start)
	os.Stdout.Close() // writing later to a dead reader's pipe would kill it with SIGPIPE
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// helperOwner owns children through a supervise.Client and obeys commands on stdin, answering
// each with data lines and then "ok" (or "error: ..."). Descriptor 3 is the test's lifeline,
// given to every child as stdin. At EOF on stdin it closes the client and exits.
//
//	spawn child|cat N [child flags]   start N children, each in its own group, and register them:
//	                                  "ready <pid> <start>" for each process
//	sup                               "sup <pid> <start>" of the running supervisor
//	waitsup PID                       wait for a supervisor other than PID, then "sup ..."
//	supgone                           wait until no supervisor runs
//	stop PGID                         SIGTERM the group, wait for its leader, unregister it
//	unregister PGID                   unregister without stopping
//	err                               "err <Client.Err()>"
//	close                             Client.Close
func helperOwner(args []string) int {
	fs := flag.NewFlagSet("owner", flag.ContinueOnError)
	grace := fs.Duration("grace", time.Second, "supervisor grace")
	idle := fs.Duration("idle", supervise.DefaultIdleGrace, "idle release")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	lifeline := os.NewFile(3, "lifeline")
	syscall.CloseOnExec(3) // only the children we hand it to get it, as stdin
	c := &supervise.Client{
		Grace:     *grace,
		IdleGrace: *idle,
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	o := &owner{c: c, lifeline: lifeline, children: map[int]*ownedChild{}}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if err := o.do(strings.Fields(sc.Text())); err != nil {
			fmt.Printf("error: %v\n", err)
		} else {
			fmt.Println("ok")
		}
	}
	c.Close()
	return 0
}

type owner struct {
	c        *supervise.Client
	lifeline *os.File
	children map[int]*ownedChild
}

type ownedChild struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (o *owner) do(f []string) error {
	if len(f) == 0 {
		return fmt.Errorf("empty command")
	}
	arg := func(i int) int {
		if i >= len(f) {
			return 0
		}
		n, _ := strconv.Atoi(f[i])
		return n
	}
	switch f[0] {
	case "spawn":
		for range arg(2) {
			if err := o.spawn(f[1], f[3:]); err != nil {
				return err
			}
		}
	case "sup":
		return o.printSup()
	case "waitsup":
		old := arg(1)
		if err := poll(func() bool { p := o.c.PID(); return p != 0 && p != old }); err != nil {
			return fmt.Errorf("no new supervisor: %w (client: %v)", err, o.c.Err())
		}
		return o.printSup()
	case "supgone":
		return poll(func() bool { return o.c.PID() == 0 })
	case "stop":
		ch := o.children[arg(1)]
		if ch == nil {
			return fmt.Errorf("no child %d", arg(1))
		}
		// The leader is our unreaped child, so its PID, and the group's id, cannot be reused.
		if err := unix.Kill(-arg(1), unix.SIGTERM); err != nil {
			return err
		}
		<-ch.done
		delete(o.children, arg(1))
		if err := o.c.Unregister(arg(1)); !errors.Is(err, supervise.ErrClosed) {
			return err
		}
	case "unregister":
		return o.c.Unregister(arg(1))
	case "leak":
		return o.leak()
	case "err":
		fmt.Printf("err %v\n", o.c.Err())
	case "close":
		return o.c.Close()
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return nil
}

func (o *owner) spawn(kind string, flags []string) error {
	exe, _ := os.Executable()
	var cmd *exec.Cmd
	switch kind {
	case "child":
		cmd = exec.Command(exe, flags...)
		cmd.Env = append(os.Environ(), testproc.Env("child"))
	case "cat":
		cmd = exec.Command("cat") // TERM-respecting and light; exits at the lifeline's EOF
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	cmd.Stdin, cmd.Stderr = o.lifeline, os.Stderr
	// No Pdeathsig here: these children must outlive a killed owner for the supervisor to kill.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out io.Reader
	if kind == "child" {
		var err error
		if out, err = cmd.StdoutPipe(); err != nil {
			return err
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	ch := &ownedChild{cmd: cmd, done: make(chan struct{})}
	o.children[pid] = ch
	var start uint64
	if kind == "child" {
		br := bufio.NewReader(out)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("child %d: %w", pid, err)
			}
			fmt.Print(line)
			if f := strings.Fields(line); len(f) == 3 && f[1] == strconv.Itoa(pid) {
				start, _ = strconv.ParseUint(f[2], 10, 64)
				break
			}
		}
	} else {
		inc, err := procid.Read(pid)
		if err != nil {
			return err
		}
		start = inc.Start
		fmt.Printf("ready %d %d\n", pid, start)
	}
	go func() {
		cmd.Wait()
		close(ch.done)
	}()
	return o.c.Register(supervise.Group{PID: pid, PGID: pid, Start: start})
}

// leak starts a cat that holds a copy of the write end of the supervisor's pipe, which the
// owner never hands out: the pipe's end then never comes while the cat lives, and only the
// owner's death word can tell the supervisor. It answers "leak <pid> <start>".
func (o *owner) leak() error {
	fd, err := unix.Dup(supervise.PipeFD(o.c))
	if err != nil {
		return err
	}
	w := os.NewFile(uintptr(fd), "supervisor pipe")
	defer w.Close()
	cmd := exec.Command("cat")
	cmd.Stdin, cmd.ExtraFiles = o.lifeline, []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	inc, err := procid.Read(cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("leak %d %d\n", inc.PID, inc.Start)
	go cmd.Wait()
	return nil
}

func (o *owner) printSup() error {
	pid := o.c.PID()
	inc, err := procid.Read(pid)
	if err != nil {
		return fmt.Errorf("supervisor %d: %w", pid, err)
	}
	fmt.Printf("sup %d %d\n", pid, inc.Start)
	return nil
}

// poll waits up to 15 s for cond.
func poll(cond func() bool) error {
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// helperDieYoung is a supervisor that signals readiness and dies after its first line. It appends its PID to
// the file $DIE_YOUNG_LOG so the test can count the starts.
func helperDieYoung(args []string) int {
	if f, err := os.OpenFile(os.Getenv("DIE_YOUNG_LOG"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	if fd, err := strconv.Atoi(os.Getenv(supervise.EnvReadyFD)); err == nil {
		unix.Write(fd, []byte{'R'})
	}
	bufio.NewReader(os.Stdin).ReadString('\n') // the registration, then death
	return 3
}

// helperSuperviseCLI stands for `custody supervise --owner-pgid P --grace D [--socket-path S]`: a supervisor
// command as Client.Command starts one.
func helperSuperviseCLI(args []string) int {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	ownerPGID := fs.Int("owner-pgid", 0, "the owner's process group")
	grace := fs.Duration("grace", stop.DefaultGrace, "SIGTERM to SIGKILL")
	socket := fs.String("socket-path", "", "the v2 socket")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := supervise.Config{OwnerPGID: *ownerPGID, Grace: *grace}
	run := func() error { return supervise.Run(cfg) }
	if *socket != "" {
		run = func() error { return supervise.RunSocket(cfg, *socket) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "supervise:", err)
		return 1
	}
	return 0
}
