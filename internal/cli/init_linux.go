package cli

// custody run as a child subreaper, and as the init of a PID namespace (a container's PID 1).
// Facts relied on:
//
//	PR_SET_CHILD_SUBREAPER   (3.4) an orphaned descendant is re-parented to the nearest living
//	                         subreaper ancestor instead of init; PID 1 of a namespace is one by
//	                         nature. Its children are then ours to reap, or they stay zombies
//	an unreaped child        keeps its PID: no other process can be given it, so a child of ours
//	                         may be signalled by PID until we reap it ourselves
//	os/exec                  (Go 1.23+, Linux 5.4+) holds a pidfd on each child it starts, from
//	                         clone(CLONE_PIDFD), and reaps it through waitid(P_PIDFD); a child
//	                         reaped by anyone else makes its Wait fail. /proc/self/fdinfo shows
//	                         each pidfd's PID ("Pid:"), so a child with a pidfd held on it is left
//	                         to whoever holds it, and every other child is an orphan to reap
//	/proc/PID/task/TID/      (3.5, CONFIG_PROC_CHILDREN) the children of each thread: the
//	children                 kernel re-parents an orphan to one thread of the subreaper
//
// Without pidfds (old kernels, a seccomp filter) a child of os/exec cannot be told from an
// orphan, and none is reaped: orphans stay zombies until custody exits, as under an init that
// does not reap.

import (
	"bytes"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/custody-dev/custody/authority"
	"golang.org/x/sys/unix"
)

// orphans reaps the orphans re-parented to this process, from a SIGCHLD to the next.
type orphans struct {
	mu    sync.Mutex // one reaping at a time: a PID found unreaped stays ours until we reap it
	sigs  chan os.Signal
	quit  chan struct{}
	done  chan struct{}
	reaps bool // this process can tell os/exec's children from orphans
}

// adoptOrphans makes this process a child subreaper and starts reaping its orphans. A process
// that cannot be one (a kernel without it) still reaps whatever is re-parented to it as PID 1.
func adoptOrphans() *orphans {
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	r := &orphans{sigs: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{}),
		reaps: authority.PidfdError() == nil}
	signal.Notify(r.sigs, unix.SIGCHLD)
	go r.loop()
	return r
}

func (r *orphans) loop() {
	defer close(r.done)
	for {
		select {
		case <-r.quit:
			return
		case <-r.sigs:
			r.reap()
		}
	}
}

// reap reaps every zombie child no pidfd of this process names.
func (r *orphans) reap() {
	if !r.reaps {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var held map[int]bool
	for _, pid := range children() {
		if state(pid) != 'Z' {
			continue
		}
		if held == nil {
			held = pidfdsHeld()
		}
		if !held[pid] {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// stop stops the orphans still alive (SIGTERM, up to grace, SIGKILL) and reaps them: the
// descendants of the child's tree that left its group and cleared their environment, which
// nothing else finds. It reports how many it signalled.
func (r *orphans) stop(grace time.Duration) int {
	if !r.reaps {
		return 0
	}
	n := len(r.signal(unix.SIGTERM))
	for deadline := time.Now().Add(grace); n > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polls our own children; synchronises with none
		r.reap()
		if len(r.alive()) == 0 {
			return n
		}
	}
	r.signal(unix.SIGKILL)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && len(r.alive()) > 0; {
		time.Sleep(10 * time.Millisecond)
		r.reap()
	}
	return n
}

// alive lists the orphans alive now: children that are no zombie and that no pidfd names.
func (r *orphans) alive() []int {
	var out []int
	held := pidfdsHeld()
	for _, pid := range children() {
		if !held[pid] && state(pid) != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// signal sends sig to every orphan alive, under the lock: each is our unreaped child, so its PID
// names it until we reap it.
func (r *orphans) signal(sig unix.Signal) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	pids := r.alive()
	for _, pid := range pids {
		unix.Kill(pid, sig)
	}
	return pids
}

// close stops reaping.
func (r *orphans) close() {
	signal.Stop(r.sigs)
	close(r.quit)
	<-r.done
}

// children lists this process's children, from every thread's children file.
func children() []int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
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

// state returns the state letter of /proc/PID/stat (after the last ')'), or 0.
func state(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

// pidfdsHeld returns the PIDs that this process's pidfds name, from /proc/self/fdinfo.
func pidfdsHeld() map[int]bool {
	held := map[int]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err != nil || link != "anon_inode:[pidfd]" {
			continue
		}
		b, err := os.ReadFile("/proc/self/fdinfo/" + fd.Name())
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
