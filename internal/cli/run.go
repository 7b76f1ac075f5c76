package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/internal/reaper"
	"github.com/custody-dev/custody/procid"
	"github.com/custody-dev/custody/stop"
)

type runOptions struct {
	*globals
	purpose  string
	grace    time.Duration
	keep     bool
	verbose  bool
	grantEnv string
	grantTTL time.Duration
	contain  string // --containment: "", "cgroup" or "process-group" (see containment.go)
	quiet    bool
	owner    string // --owner: parent, self or a PID (see takeOwner)
	argv     []string
}

const runHelp = `Start CMD as an owned child in a scope of its own, stamp the spawn tag, record it in the
ledger and cover it with the owner-death supervisor. On Linux the scope is a cgroup v2 the child is
born into, wherever a writable cgroup2 subtree exists (as root, or in a cgroup delegated to you);
otherwise, where a systemd user manager answers on the session bus, a cgroup in a transient unit
with Delegate=yes that custody asks it for: a scope custody moves into, or, where custody's own
cgroup is root's (an SSH session), a service running custody agent, which starts the child there
and passes its stdio back (without the terminal's job control, and without --grant-env);
otherwise, and on macOS, it is a process group ('custody doctor' says which, why, and how to get a
cgroup), and custody says so once on stderr (--quiet silences it). --containment cgroup (or
CUSTODY_CONTAINMENT=cgroup) refuses to start without a cgroup instead (exit status 1);
--containment process-group (or CUSTODY_CONTAINMENT=process-group) never makes one. SIGINT,
SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to custody are forwarded to the child's scope,
and SIGWINCH too when custody is not the terminal's foreground (in a terminal the child's group
is, and the terminal tells it). When the child exits, whatever is left of its scope is stopped
(SIGTERM, the grace, SIGKILL), its row is dropped, and custody exits with the child's exit code, or
128+N when a signal N killed it; --verbose then says on stderr how it ended and what was stopped
after it.

--purpose must be non-empty and hold no ':', and the tag variable (--tag-env) must be an
environment name not already set to something other than a spawn tag.

%s

If custody itself dies, by any cause (SIGKILL, OOM, a crash), the supervisor stops the whole scope
within the grace. If the supervisor dies, custody says so on standard error, starts a new one
(after a wait that grows, up to 5 s, while supervisors keep dying young) and says when the child
is covered again. custody run inside a custody scope is a nested owner: its child's cgroup is
made inside its own, so the outer owner's death reaches it too.

With --grant-env NAME, CMD finds in $NAME a grant for itself: a one-shot string that another
program redeems with custody adopt (or the Go API) to become CMD's owner. Once the new owner has
recorded its receipt and covers the group, custody stops covering it, says on stderr to whom it
handed CMD, and exits 0 without stopping anything. The grant is served for --grant-ttl; unredeemed,
it changes nothing. Without --grant-env no grant is minted.

Standard input, output and error pass through untouched. In a terminal, the child's group is made
the terminal's foreground group while it runs, so an interactive child (a shell, an editor) reads
the terminal, and ^C reaches it directly; custody takes the terminal back after. On Linux, ^Z
stops the child and then custody, as the shell expects of its job, and fg continues both. In a
cgroup nothing the child starts can leave its scope; in a process group, a descendant that calls
setsid or setpgid leaves the group, and is still stopped with it, by custody's death, stop and
reap, through the scope id in its environment ($CUSTODY_SCOPE), unless it also execs with a cleared
environment.

On Linux custody run is a child subreaper: orphans of the child's tree are re-parented to it while
it runs, reaped, and stopped with what is left of the scope when the child exits. As PID 1 of a
PID namespace (a container's init) it reaps every orphan, passes the signals above to the child's
scope as tini does, and exits with the child's status.

On Windows the scope is a job object that dies with custody, and the console's ^C reaches the
child directly (it shares custody's console process group); there are no signals to forward.

EXIT STATUS
  0       the child was handed to another owner (--grant-env)
  N       the child's exit code
  128+N   the child was killed by signal N
  129     the owner ended (see --owner), and the child's scope was stopped; the line on standard
          error tells this from a child killed by SIGHUP
  1       custody could not start or record the child, or the owner was already gone; whatever
          it had started was killed
  2       bad flags or arguments
  126     CMD was found but could not be executed
  127     CMD was not found (in $PATH, or at the path given)
  11      the ledger lock was held too long by another process; the child was not started`

func newRun(g *globals) *cli.Command {
	o := &runOptions{globals: g}
	return &cli.Command{
		Name:         "run",
		Usage:        "Run a command as an owned child that dies with custody",
		UsageText:    "custody run [--purpose P] [--grace D] [--owner parent|PID|self] [--keep] [--verbose] [--quiet] [--containment cgroup|process-group] [--grant-env NAME [--grant-ttl D]] -- CMD [ARGS]",
		Description:  fmt.Sprintf(runHelp, ownerHelp),
		StopOnNthArg: new(1), // flags after CMD belong to CMD
		ArgValidator: needArgs("a command to run"),
		Flags: []cli.Flag{
			graceFlag(&o.grace, " for what is left"),
			&cli.StringFlag{Name: "grant-env", Destination: &o.grantEnv, Validator: nonEmpty,
				Usage: "hand CMD a grant for itself in this environment variable (see custody adopt)"},
			&cli.DurationFlag{Name: "grant-ttl", Value: custody.DefaultGrantTTL, Destination: &o.grantTTL,
				Usage: "how long the grant is served"},
			&cli.BoolFlag{Name: "keep", Destination: &o.keep, Usage: "never let reap stop it after a crash"},
			ownerFlag(&o.owner),
			&cli.StringFlag{Name: "purpose", Value: custody.DefaultPurpose, Destination: &o.purpose,
				Usage: "what the child is for: serve, gateway, mcp-helper, …"},
			&cli.StringFlag{Name: "containment", Destination: &o.contain,
				Usage: "cgroup: refuse to start without one; process-group: never make one (default: $CUSTODY_CONTAINMENT, else the best there is)"},
			&cli.BoolFlag{Name: "quiet", Destination: &o.quiet,
				Usage: "do not say on stderr that the child fell back to a process group"},
			&cli.BoolFlag{Name: "verbose", Destination: &o.verbose,
				Usage: "say on stderr how the child ended and what was stopped after it"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			o.argv = argsAsGiven(cmd)
			return runRun(ctx, o)
		},
	}
}

// forwarded are the signals custody run passes to the child's group. relayed adds the resize
// signals, which it passes on only when it is not the terminal's foreground: the terminal then
// does not tell the child's group that its size changed, and whoever tells custody (a
// multiplexer, a terminal emulator's child) must.
var (
	forwarded = forwardedSignals()
	relayed   = append(slices.Clip(forwarded), resizeSignals()...)
)

func runRun(ctx context.Context, o *runOptions) error {
	ctx = context.WithoutCancel(ctx) // signals are forwarded, not taken as custody's own end
	if err := checkPurpose(o.purpose); err != nil {
		return err
	}
	if o.grantTTL <= 0 {
		return usagef("--grant-ttl %v: must be positive", o.grantTTL)
	}
	if strings.ContainsAny(o.grantEnv, "=\x00") {
		return usagef("--grant-env %q: not a variable name", o.grantEnv)
	}
	tagEnv, err := o.tagName()
	if err != nil {
		return err
	}
	// The reaper starts beside the checks below, rather than after them: its first
	// signal.Notify and the os package's probe of pidfd support (which forks a process) take
	// some 0.6 ms here. The child's start waits for it: its orphans come to custody from its
	// first fork.
	reaped := make(chan *reaper.Reaper, 1)
	go func() {
		r, _ := reaper.Start()
		reaped <- r
	}()
	startedReaper := sync.OnceValue(func() *reaper.Reaper { return <-reaped })
	defer func() { startedReaper().Close() }()
	// Where no process can be identified (the BSDs), nothing can be owned: say that, first.
	if err := procid.Supported(); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	asked, err := askedContainment(o.contain)
	if err != nil {
		return err
	}
	if err := applyContainment(asked); err != nil {
		return err
	}
	// The owner is held before anything is read or started: one already gone changes nothing.
	served, err := takeOwner(o.owner)
	if err != nil {
		return err
	}
	if served != nil {
		defer served.Close()
	}
	path, err := exec.LookPath(o.argv[0])
	if err != nil {
		fmt.Fprintf(o.stderr, "custody: error: run: %v\n", err)
		// A shell's convention: 127 for a command that is not there, whether looked up in $PATH
		// or named by a path; 126 for one that is there but cannot be run.
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return statusError{127}
		}
		return statusError{126}
	}
	if needsService() { // an SSH session's cgroup: only a systemd service can hold delegated cgroups
		return runInService(ctx, o, path, served)
	}
	// The relay is registered beside the supervisor's start, not on the child's path: the first
	// Notify of each signal is a round trip to the runtime's signal thread, 0.2 ms for the relay
	// here. A signal that comes before the child runs waits in the channel, and then goes to its
	// scope.
	sigs := make(chan os.Signal, 8)
	relaying := make(chan struct{})
	go func() {
		defer close(relaying)
		if len(relayed) > 0 { // Notify with no signals would relay every signal (Windows has none)
			signal.Notify(sigs, relayed...)
		}
		// SIGPIPE is caught from here on, as sayOwnerEnded catches it before its line: the end of
		// the owner often closes the pipe stderr is, and custody must live to stop the child. Its
		// round trip is taken here rather than on the way from the owner's end to the stop.
		catchBrokenPipe()
	}()
	// Once the child runs the relay is never stopped: custody run's end is its process's (it is
	// a subreaper from its start, and that is not undone either), and Stop's round trips would
	// hold that end 0.2 ms. A signal that comes while custody ends is received and dropped, as it
	// was while Stop waited for the end, rather than killing custody between its writes.
	relayKept := false
	defer func() {
		if !relayKept {
			<-relaying
			signal.Stop(sigs)
		}
	}()
	// The supervisor starts here, not in a goroutine: the child's start waits for its fork and
	// exec (some 0.6 ms here), and a goroutine would add the wake of a thread to run it (0.1 to
	// 0.2 ms). Its error, if any, is the start's: Owner.Start asks for it again.
	sup := o.newSupervisor(o.grace, "run")
	defer sup.Close()
	go procid.Self() // the first read of this process's own incarnation (0.15 ms), for the owner
	sup.Start()
	l, err := o.open()
	if err != nil {
		return err
	}
	// A process that cannot be a subreaper still reaps what comes to it as PID 1; one that cannot
	// tell orphans apart reaps nothing, and custody runs on as under an init that does not reap.
	orphans := startedReaper()
	owner := o.newOwnerWith(l, tagEnv, o.grace, ownerID(served), sup)
	defer owner.Close() // before the supervisor's: it stops what is left and removes its cgroups
	cmd := exec.Command(path, o.argv[1:]...)
	cmd.Args[0] = o.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	tty := foreground(cmd)
	child, err := owner.Start(ctx, cmd, custody.StartOptions{Purpose: o.purpose, Keep: o.keep, SharedConsole: true,
		GrantEnv: o.grantEnv, GrantTTL: o.grantTTL})
	if err != nil {
		tty.restore()
		return err
	}
	relayKept = true
	l.StartsDone() // its one start is made: the row's drop is the ledger's last write here
	tty.followStops(child)
	warnFallback(o.stderr, asked, child.Containment(), o.quiet)
	var granted <-chan struct{} // nil, never ready, without a grant
	if g := child.EnvGrant(); g != nil {
		granted = g.Done()
	}
	for waiting := true; waiting; {
		select {
		case sig := <-sigs:
			if tty != nil && slices.Contains(resizeSignals(), sig) {
				continue // the terminal tells the child's group, its foreground, itself
			}
			child.Signal(sig) // an already-exited group has nothing to forward to
		case <-child.Done():
			waiting = false
		case <-ownerDone(served):
			sayOwnerEnded(o.stderr, "run", served, child.ID.PID)
			tty.restore()
			if res := stopAll(ctx, child, orphans, o.grace); !res.OK() {
				fmt.Fprintf(o.stderr, "custody: warning: run: the child's scope: %s: %s\n", res.Outcome, res.Reason)
			}
			return statusError{exitOwnerGone}
		case <-granted:
			granted = nil
			if handedOver(o.stderr, child) {
				tty.restore()
				return nil
			}
		}
	}
	tty.restore()
	// Nothing is left to cover once the scope is stopped and released: the supervisor is released
	// then, and its exit runs beside the rest of the release, the orphans' pass and Owner.Close
	// (its Close waits for an exit under way). When something is still covered it stays, for
	// Owner.Close's stop.
	sup.ReleaseWhenIdle()
	res := stopAll(ctx, child, orphans, o.grace)
	if !res.OK() {
		fmt.Fprintf(o.stderr, "custody: warning: run: what is left of the child's scope: %s: %s\n", res.Outcome, res.Reason)
	}
	code := exitStatus(child.Wait())
	if o.verbose {
		fmt.Fprintf(o.stderr, "custody: run: pid %d %s; %s\n", child.ID.PID, ended(code), leftover(res))
	}
	return statusError{code}
}

// stopAll stops what is left of the child's scope and the orphans that came to this process, at
// once: they are apart (an orphan here left the scope, or was never in a cgroup), and each takes a
// few hundred microseconds when there is nothing to stop (the scope's release writes the ledger;
// the orphans' pass reads this process's children and descriptors), which custody run's end paid
// one after the other.
func stopAll(ctx context.Context, child *custody.Child, orphans *reaper.Reaper, grace time.Duration) stop.Result {
	done := make(chan struct{})
	go func() {
		defer close(done)
		orphans.Stop(grace)
	}()
	res := child.Stop(ctx, stop.Options{Grace: grace})
	<-done
	return res
}

// ended says how the child ended, from its exit status.
func ended(code exitCode) string {
	if code > 128 {
		return fmt.Sprintf("was killed by signal %d (exit status %d)", code-128, code)
	}
	return fmt.Sprintf("exited with status %d", code)
}

// leftover says what the stop after the child's exit found and did.
func leftover(res stop.Result) string {
	switch {
	case res.Outcome == stop.AlreadyExited:
		return "nothing was left in its scope"
	case res.Outcome == stop.Exited && res.Forced:
		return "what was left in its scope was killed after the grace"
	case res.Outcome == stop.Exited:
		return "what was left in its scope was stopped"
	}
	return fmt.Sprintf("what was left in its scope: %s: %s", res.Outcome, res.Reason)
}

// coverage returns the verb's report of each loss of the child's cover against custody's death,
// and of its return, on stderr: while no supervisor runs, a SIGKILL of custody would leave the
// child running.
func coverage(stderr io.Writer, verb string) func(lost error) {
	return func(lost error) {
		if lost != nil {
			fmt.Fprintf(stderr, "custody: warning: %s: %v\n", verb, lost)
			return
		}
		fmt.Fprintf(stderr, "custody: %s: a new supervisor covers the child again\n", verb)
	}
}

// exitStatus is the shell's convention: the exit code, or 128+N for a death by signal N.
func exitStatus(err error) exitCode {
	if err == nil {
		return exitOK
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		if n, ok := signalled(ee); ok {
			return exitCode(128 + n)
		}
		return exitCode(ee.ExitCode())
	}
	return exitError
}

// handedOver reports whether the child's grant ended in a transfer, and says so on stderr, naming
// the new owner; a grant that ended otherwise is reported and changes nothing.
func handedOver(stderr io.Writer, child *custody.Child) bool {
	res := child.EnvGrant().Result()
	if res.Outcome != custody.Transferred {
		fmt.Fprintf(stderr, "custody: run: grant %s: %s; pid %d stays this run's\n", res.Outcome, res.Reason, child.ID.PID)
		return false
	}
	who := "pid " + strconv.Itoa(res.Receiver)
	if argv, err := procid.Cmdline(res.Receiver); err == nil && len(argv) > 0 {
		who += " (" + filepath.Base(argv[0]) + ")"
	}
	fmt.Fprintf(stderr, "custody: run: handed pid %d to %s, its owner now\n", child.ID.PID, who)
	return true
}
