//go:build linux || darwin

package supervise

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody/internal/selfexe"
	"github.com/custody-dev/custody/internal/sockdir"
	"github.com/custody-dev/custody/scope"
)

// readyFD is the supervisor's descriptor for the readiness pipe: the first of ExtraFiles.
const readyFD = 3

func ownGroup() int { return unix.Getpgrp() }

// spawn starts a supervisor. It waits until the supervisor is ready to read its pipe where a
// nest socket must listen first (the process-group path: a child's first dial must find it) and
// for a supervisor the Client does not build itself (Command). Elsewhere (the built-in supervisor
// on the cgroup path) it returns once the process is started and its readiness is awaited in the
// background: the lines written meanwhile wait in the pipe, and the supervisor reads every one of
// them even when its owner died before it ran (see dyingReader), so a child covered by them is
// covered from its first instruction, and the Go runtime's start in a second process, about as
// long as the owner's own, is no longer on the child's path. A supervisor not ready within
// StartTimeout is then a loss, told to Notify and replaced, as one that dies later is.
func (c *Client) spawn() (p *proc, err error) {
	cmd, err := c.command()
	if err != nil {
		return nil, err
	}
	// os.Pipe opens both ends close-on-exec (pipe2(O_CLOEXEC) on Linux, under ForkLock on
	// macOS), so no child the owner starts, now or later, inherits the write end: one that did
	// would keep the pipe open after the owner's death and the supervisor would never see EOF.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	defer r.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	later := len(c.Command) == 0 && c.nestDir == "" // command() has chosen the nest
	defer func() {
		if err != nil || !later {
			ready.Close()
		}
	}()
	cmd.Stdin = r
	// Not cmd.Stderr = c.Stderr: a nil *os.File in the interface would start the supervisor
	// with descriptor 2 closed, and its next open(2) would take that number.
	cmd.Stderr = os.Stderr
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	}
	cmd.ExtraFiles = []*os.File{readyW}
	// Linux: the word the kernel marks when this process begins to die, so that the supervisor
	// need not wait until the dying owner's files close (see giveDeathWord).
	give := giveDeathWord(cmd)
	defer func() {
		if err != nil && give != nil {
			give()
		}
	}()
	// Its own session: neither the terminal's SIGINT/SIGHUP nor a kill of the owner's group
	// reaches it. No Pdeathsig: the supervisor must outlive its owner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The root directory, so that the supervisor does not pin the owner's working directory's
	// mount for its lifetime.
	cmd.Dir = "/"
	// Its wake-ups never preempt the owner (Linux): see startYielding.
	err = startYielding(cmd)
	readyW.Close()
	if err != nil {
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	started := time.Now()
	p = &proc{cmd: cmd, w: w, started: started, give: give, nest: c.nestDir}
	if later {
		c.waiters.Add(1)
		go c.awaitReadyLater(p, ready)
		return p, nil
	}
	if err := awaitReady(ready, c.startTimeout()); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		removeNestDir(c.nestDir) // the killed supervisor may have made it
		if len(c.Command) == 0 {
			err = fmt.Errorf("%w (does main call custody.Init first?)", err)
		}
		return nil, fmt.Errorf("start supervisor %s: %w", cmd.Path, err)
	}
	c.holdNestLocked()
	return p, nil
}

// holdNestLocked takes the owner's lock on its nest directory, once its supervisor is ready and
// so has made it, unless it holds one on that directory already. While the owner holds it, no
// sweeper removes the directory, even while no supervisor runs (one killed, its replacement not
// yet listening), and so no other process can take the name its children hold. A directory that
// is not there (a supervisor that makes no nest, as a Hermes one; one killed since it was ready)
// is held by nobody but a supervisor that makes it later: the owner's lock only closes the gap
// between a lost supervisor and its replacement.
func (c *Client) holdNestLocked() {
	if c.nestDir == "" {
		return
	}
	if c.nestLock.At(c.nestDir) {
		return
	}
	c.nestLock.Release()
	c.nestLock = nil
	l, err := sockdir.LockDir(c.nestDir)
	if err != nil {
		c.logger().Debug("supervise: hold the nest directory", "dir", c.nestDir, "err", err)
		return
	}
	c.nestLock = l
}

// awaitReadyLater awaits the readiness of p, started by spawn without waiting for it, and closes
// ready. A current supervisor that is not ready in time, or exited before it was, is a loss: it
// is killed, and its waiter handles the loss as it handles any death (reported, replaced, or with
// nothing covered told as an idle release, so that the owner lets go of its reservations), with
// this reason. One released or replaced meanwhile is left alone.
func (c *Client) awaitReadyLater(p *proc, ready *os.File) {
	defer c.waiters.Done()
	err := awaitReady(ready, c.startTimeout())
	ready.Close()
	if err == nil {
		return
	}
	c.mu.Lock()
	current := c.sup == p
	if current {
		p.unready = fmt.Errorf("%w (does main call custody.Init first?)", err)
	}
	c.mu.Unlock()
	if current {
		p.cmd.Process.Kill() // through its handle: once reaped, it reaches nothing
	}
}

// awaitReady waits for the supervisor's readiness byte.
func awaitReady(ready *os.File, timeout time.Duration) error {
	if err := ready.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	var b [1]byte
	n, err := ready.Read(b[:])
	switch {
	case n == 1:
		return nil
	case err == io.EOF:
		return errors.New("exited before it was ready")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("not ready after %v", timeout)
	}
	return fmt.Errorf("wait for readiness: %w", err)
}

// command builds the supervisor's command, without its descriptors.
func (c *Client) command() (*exec.Cmd, error) {
	pgid := strconv.Itoa(ownGroup())
	grace := c.grace().String()
	env := append(environ(), EnvReadyFD+"="+strconv.Itoa(readyFD))
	if path := c.nestPathLocked(); path != "" {
		env = append(env, EnvNestSocket+"="+path)
	}
	if dir := scope.OwnerDir(); dir != "" {
		env = append(env, EnvOwnerCgroup+"="+dir)
	}
	if len(c.Command) > 0 {
		path, err := exec.LookPath(c.Command[0])
		if err == nil {
			// The supervisor runs in "/": a relative path must be resolved here.
			path, err = filepath.Abs(path)
		}
		if err != nil {
			return nil, fmt.Errorf("supervisor command: %w", err)
		}
		args := append(slices.Clone(c.Command), "--owner-pgid", pgid, "--grace", grace)
		return &exec.Cmd{Path: path, Args: args, Env: env}, nil
	}
	if os.Getenv(EnvSupervisor) == "1" || !initCalled.Load() {
		return nil, ErrNoInit
	}
	path, err := selfexe.Path() // the running binary, even after an upgrade in place
	if err != nil {
		return nil, fmt.Errorf("supervisor command: %w", err)
	}
	name := selfexe.Name(path)
	// One P: the supervisor runs one goroutine, and every P costs memory (its mcache) and may
	// cost a thread. Set in the environment, it applies before the runtime allocates them.
	env = append(env, EnvSupervisor+"=1", EnvOwnerPGID+"="+pgid, EnvGrace+"="+grace, "GOMAXPROCS=1")
	// The arguments are for ps alone (Init reads the environment): they say what the process is
	// and whose, in the form `custody supervise` takes, so that a supervisor is told apart from
	// its owner, which runs the same binary. A Hermes supervisor (Command) is started as it is.
	args := []string{name, "supervise", "--owner-pid", strconv.Itoa(os.Getpid()), "--owner-pgid", pgid, "--grace", grace}
	return &exec.Cmd{Path: path, Args: args, Env: env}, nil
}

// environ is the owner's environment without the variables the client sets, which the owner may
// have inherited and which must not leak into the supervisor's configuration. $EnvLog passes.
// Grants go too (a value that starts with grantPrefix, whatever the variable): a supervisor has no
// use for one, and a grant left in a process's environment is readable there (/proc/PID/environ)
// by every process of the user for as long as that process lives.
func environ() []string {
	env := os.Environ()
	return slices.DeleteFunc(env, func(kv string) bool {
		k, v, _ := strings.Cut(kv, "=")
		return k == EnvSupervisor || k == EnvOwnerPGID || k == EnvGrace || k == EnvReadyFD || k == EnvNestSocket ||
			k == EnvDeath || k == EnvOwnerCgroup || k == EnvBatch || strings.HasPrefix(v, grantPrefix)
	})
}

// grantPrefix starts every grant string (custody's grant.go).
const grantPrefix = "custody-grant-v1:"

// nestPathLocked returns the path of the nest socket for the next supervisor (see [EnvNestSocket]),
// in a directory of a fresh random name the supervisor makes (mode 0700) and removes as it
// exits, or "" when nested owners have no use for one: where this process's children get cgroups,
// a nested owner makes its scopes below its own cgroup and dials no nest (custody's stampOuter
// names none to a cgroup child). The directory is the supervisor's, not the client's: made by the
// process that outlives the owner, it never outlives both. A lost supervisor's replacement
// listens in the same directory, whose path the children already hold.
func (c *Client) nestPathLocked() string {
	if kind, _, _ := scope.Containment(); kind == scope.KindCgroup {
		c.nestDir = ""
		c.nestLock.Release()
		c.nestLock = nil
		return ""
	}
	if c.nestDir == "" {
		c.nestDir = filepath.Join(os.TempDir(), "custody-nest-"+rand.Text())
	}
	return filepath.Join(c.nestDir, "s")
}

// NestSocket returns the nest socket of the running supervisor, the value for a child's
// [EnvOuter], or "" when none runs.
func (c *Client) NestSocket() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sup == nil || c.nestDir == "" {
		return ""
	}
	return filepath.Join(c.nestDir, "s")
}

// removeNest removes the nest directory once every supervisor has exited.
func (c *Client) removeNest() { removeNestDir(c.nestDir) }

// removeNestDir removes a nest directory (see nestPathLocked) and its socket, if dir is not "".
func removeNestDir(dir string) {
	if dir != "" {
		os.Remove(filepath.Join(dir, "s"))
		os.Remove(dir)
	}
}

// ownPrivateDir reports whether dir is still a directory of this user's with mode 0700: a name
// that another process took after the supervisor removed the directory is never listened in.
func ownPrivateDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
