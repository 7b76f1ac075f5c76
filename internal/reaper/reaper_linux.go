package reaper

// Facts relied on:
//
//	PR_SET_CHILD_SUBREAPER   (3.4) an orphaned descendant is re-parented to the nearest living
//	                         subreaper ancestor instead of init; PID 1 of a namespace is one by
//	                         nature. Its children are then ours to reap, or they stay zombies
//	os/exec                  (Go 1.23+, Linux 5.4+) holds a pidfd on each child it starts, from
//	                         clone(CLONE_PIDFD) (installed before the child runs, so before it can
//	                         exit) until its Wait has reaped the child through waitid(P_PIDFD). A
//	                         child reaped by anyone else makes that Wait fail. os.FindProcess
//	                         returns a Process with a handle exactly when os/exec takes pidfds
//	pidfd_open(2)            (5.3) pins a process, not a PID: waitid(P_PIDFD) through it (5.4)
//	                         can only ever reap that process, even if its PID is reused meanwhile,
//	                         and answers ECHILD unless it is this process's child
//	waitid(WNOWAIT)          reports an exited child and leaves it a zombie; with WNOHANG and no
//	                         child to report, Linux leaves si_signo 0 (SIGCHLD otherwise)
//	/proc/self/fdinfo/FD     "Pid:" of the process a pidfd names while it is unreaped (5.10+: -1
//	                         once it has been reaped; before 5.10 the old PID stays, which can
//	                         only make an orphan look claimed, never the reverse)
//	/proc/PID/task/TID/      (3.5, CONFIG_PROC_CHILDREN) the children of each thread: the kernel
//	children                 re-parents an orphan to one thread of the subreaper
//
// So a child is reaped here only through a pidfd opened on it, after it was proven an exited
// child of ours through that pidfd, and only when no other pidfd of this process named it after
// that proof: a child os/exec started is then either still unreaped, and its waiter's pidfd
// names it, or already reaped, and the waitid through the pin answers ECHILD. No timing enters.
//
// Without os/exec's pidfds (kernels before 5.4, a seccomp filter) a child of os/exec cannot be
// told from an orphan: this process is then not made a subreaper, and nothing is reaped.

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"github.com/custody-dev/custody/internal/eintr"
	"github.com/custody-dev/custody/internal/procfs"
	"golang.org/x/sys/unix"
)

// Reaper reaps the orphans re-parented to this process.
type Reaper struct {
	mu    sync.Mutex // one pass at a time: an orphan pinned and found unclaimed is ours to reap
	sigs  chan os.Signal
	quit  chan struct{}
	done  chan struct{}
	reaps bool // os/exec holds pidfds: its children can be told from orphans
}

// retryMin and retryMax bound the wait before another pass when a pass left a zombie to the
// pidfd that named it: a waiter reaps it soon, but a pidfd held for another reason (a stop
// proving an orphan) lets go without a SIGCHLD to tell of it.
const (
	retryMin = 10 * time.Millisecond
	retryMax = time.Second
)

// gap is how long a pass waits after the SIGCHLD that calls it, and the least time between two
// passes. A pass reads every child's /proc stat and, with an exited child about, every pidfd's
// fdinfo (about a millisecond with 50 children, BENCHMARKS.md). Run at once, it would run in the
// very moment that a waiter is reaping its own child and telling of its exit (an agent's exit
// event), on the same CPUs, and find that child still a zombie, claimed, which costs the full
// scan and then a retry. A gap later the waiters have reaped theirs, and what is left is the
// orphans'. The SIGCHLDs of a gap are one pass, after it: a burst of exits (an agent's short
// children) is one pass, not one each. An orphan's zombie waits that long, holding only its PID.
const gap = 25 * time.Millisecond

func start() (*Reaper, error) {
	r := &Reaper{sigs: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if err := osPidfds(); err != nil {
		close(r.done)
		return r, fmt.Errorf("reaper: orphans are not reaped: %w", err)
	}
	r.reaps = true
	err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	signal.Notify(r.sigs, unix.SIGCHLD)
	go r.loop()
	if err != nil {
		return r, fmt.Errorf("reaper: %w", os.NewSyscallError("prctl PR_SET_CHILD_SUBREAPER", err))
	}
	return r, nil
}

// osPidfds returns nil when os/exec takes a pidfd on each child it starts: the os package makes
// that choice once, and os.FindProcess gives a handle exactly when it made it.
var osPidfds = sync.OnceValue(func() error {
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		return err
	}
	defer p.Release()
	if err := p.WithHandle(func(uintptr) {}); err != nil {
		return fmt.Errorf("os/exec holds no pidfd on its children: %w", err)
	}
	return nil
})

func (r *Reaper) loop() {
	defer close(r.done)
	var retry <-chan time.Time
	wait := retryMin
	for {
		select {
		case <-r.quit:
			return
		case <-r.sigs:
		case <-retry:
		}
		select {
		case <-r.quit:
			return
		case <-time.After(gap):
		}
		left := r.reap()
		if left {
			retry, wait = time.After(wait), min(2*wait, retryMax)
		} else {
			retry, wait = nil, retryMin
		}
	}
}

// reap reaps every exited child that no other pidfd of this process names, and reports whether
// it left one to such a pidfd.
func (r *Reaper) reap() (left bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pins := pin(true)
	defer unpin(pins)
	for _, p := range pins {
		if p.claimed {
			left = true
			continue
		}
		p.reap()
	}
	return left
}

// reap reaps the pinned child, which has exited. ECHILD: its waiter reaped it after all (it can
// be nobody else's).
func (p pinned) reap() {
	var info unix.Siginfo
	eintr.Ignoring(func() error { return unix.Waitid(unix.P_PIDFD, p.fd, &info, unix.WEXITED|unix.WNOHANG, nil) })
}

func (r *Reaper) stop(grace time.Duration) int {
	if !r.reaps {
		return 0
	}
	n := r.signalReaping(unix.SIGTERM)
	if n == 0 { // none alive (the common end of custody run): the exited ones are reaped, and that is all
		return 0
	}
	for deadline := time.Now().Add(grace); n > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polls our own children; synchronises with none
		r.reap()
		if !r.alive() {
			return n
		}
	}
	if n > 0 {
		r.signal(unix.SIGKILL)
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && r.alive(); {
		time.Sleep(10 * time.Millisecond)
		r.reap()
	}
	r.reap()
	return n
}

// signal sends sig, through a pidfd pinned on each, to every orphan alive, and reports to how many.
func (r *Reaper) signal(sig unix.Signal) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	pins := pin(false)
	defer unpin(pins)
	n := 0
	for _, p := range pins {
		if !p.claimed && unix.PidfdSendSignal(p.fd, sig, nil, 0) == nil {
			n++
		}
	}
	return n
}

// signalReaping is signal and reap in one pass: it sends sig to every orphan alive and reaps every
// orphan exited, and reports how many it signalled. One listing of the children and one scan of the
// pidfds instead of two: at custody run's end, where there is usually nothing to stop, the pass is
// on the way to its exit.
func (r *Reaper) signalReaping(sig unix.Signal) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	pins := pinWhere(func(bool) bool { return true })
	defer unpin(pins)
	n := 0
	for _, p := range pins {
		switch {
		case p.claimed:
		case p.exited:
			p.reap()
		case unix.PidfdSendSignal(p.fd, sig, nil, 0) == nil:
			n++
		}
	}
	return n
}

// alive reports whether an orphan is alive.
func (r *Reaper) alive() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	pins := pin(false)
	defer unpin(pins)
	for _, p := range pins {
		if !p.claimed {
			return true
		}
	}
	return false
}

func (r *Reaper) close() {
	signal.Stop(r.sigs)
	close(r.quit)
	<-r.done
}

// pinned is a child of this process held through a pidfd of the reaper's own.
type pinned struct {
	pid, fd int
	exited  bool // it had exited when pinned
	claimed bool // another pidfd of this process names it: a waiter's, or another holder's
}

// pin opens a pidfd on each child of this process that has exited (or, with exited false, that
// has not), proves through it that the process is still such a child, and then marks those that
// another pidfd of this process names. The order is what makes it exact: a waiter's pidfd exists
// before its child can exit and is closed only after the child is reaped, so a child proven
// unreaped before the scan of pidfds is seen claimed by it, or is reaped by then and beyond the
// pin's reach.
func pin(exited bool) []pinned {
	return pinWhere(func(z bool) bool { return z == exited })
}

// pinWhere is pin of the children for which want, told whether the child has exited, is true.
func pinWhere(want func(exited bool) bool) []pinned {
	var pins []pinned
	for _, pid := range children() {
		if !want(state(pid) == 'Z') {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // ESRCH: reaped since
		}
		var info unix.Siginfo
		err = eintr.Ignoring(func() error {
			return unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		})
		// ECHILD: the PID names another process now, not our child; si_signo: whether it exited.
		exited := info.Signo == int32(unix.SIGCHLD)
		if err != nil || !want(exited) {
			unix.Close(fd)
			continue
		}
		pins = append(pins, pinned{pid: pid, fd: fd, exited: exited})
	}
	if len(pins) == 0 {
		return nil
	}
	claimed := pidfdPIDs(pins)
	for i := range pins {
		pins[i].claimed = claimed[pins[i].pid]
	}
	return pins
}

func unpin(pins []pinned) {
	for _, p := range pins {
		unix.Close(p.fd)
	}
}

// children lists this process's children, from every thread's children file.
func children() []int {
	var tasks []string
	if d, err := os.Open("/proc/self/task"); err == nil {
		tasks, _ = d.Readdirnames(-1) // not filepath.Glob: its matching and sorting were a tenth of a pass
		d.Close()
	}
	var out []int
	buf := make([]byte, 0, 4096)
	for _, t := range tasks {
		b, err := procfs.Append("/proc/self/task/"+t+"/children", buf[:0])
		buf = b // a long file's growth serves the next thread's too
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// state returns the state letter of /proc/PID/stat, the field after the last ')' (the command
// name may hold any byte), or 0.
func state(pid int) byte {
	var buf [1024]byte
	b, err := procfs.Append("/proc/"+strconv.Itoa(pid)+"/stat", buf[:0])
	if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

// pidfdPIDs returns the PIDs that this process's pidfds name, but for the reaper's own pins.
func pidfdPIDs(pins []pinned) map[int]bool {
	own := map[string]bool{}
	for _, p := range pins {
		own[strconv.Itoa(p.fd)] = true
	}
	held := map[int]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if own[fd.Name()] {
			continue
		}
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err != nil || !isPidfd(link) {
			continue
		}
		var buf [1024]byte
		b, err := procfs.Append("/proc/self/fdinfo/"+fd.Name(), buf[:0])
		if err != nil {
			continue
		}
		for line := range bytes.Lines(b) {
			if rest, ok := bytes.CutPrefix(line, []byte("Pid:")); ok {
				if pid, err := strconv.Atoi(string(bytes.TrimSpace(rest))); err == nil {
					held[pid] = true
				}
			}
		}
	}
	return held
}

// isPidfd reports whether a /proc/self/fd link names a pidfd: "anon_inode:[pidfd]", as every
// kernel so far shows it, pidfs's (6.9+) included; "pidfd:" is accepted too, should pidfs ever
// name its files as its other users see them.
func isPidfd(link string) bool {
	return link == "anon_inode:[pidfd]" || len(link) > 6 && link[:6] == "pidfd:"
}
