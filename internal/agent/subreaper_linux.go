package agent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// orphanTicks is how many sweeps in a row a zombie must be seen before the agent reaps it: a
// child the agent started itself (a Child's leader, the supervisor) is reaped by its own waiter
// as soon as it exits, and reaping it here would take its exit status from that waiter.
const orphanTicks = 3

// subreaper makes the agent the child subreaper of everything its children start
// (prctl(PR_SET_CHILD_SUBREAPER), Linux 3.4): a descendant whose parent exits is re-parented to
// the agent rather than to init, so that on the process-group path (no cgroup) it stays among
// the agent's descendants, where the environment sweep finds it. Such orphans are the agent's to
// reap, or they would stay zombies until the agent's end: a sweep every second reaps those that
// none of the agent's own waiters claims.
func (s *server) subreaper(done <-chan struct{}) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(s.cfg.Stderr, "custody: warning: agent: %v\n", os.NewSyscallError("prctl PR_SET_CHILD_SUBREAPER", err))
		return
	}
	go func() {
		seen := map[int]int{} // zombie orphans, and how many sweeps in a row saw them
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			seen = s.reapOrphans(seen)
		}
	}()
}

// reapOrphans reaps the zombies among the agent's children that are not its own and were seen in
// orphanTicks sweeps in a row, and returns the zombies seen this time.
func (s *server) reapOrphans(seen map[int]int) map[int]int {
	own := map[int]bool{s.sup.PID(): true}
	s.mu.Lock()
	for pid, h := range s.children {
		own[pid] = !h.ended
	}
	s.mu.Unlock()
	now := map[int]int{}
	for _, pid := range children() {
		if own[pid] || !zombie(pid) {
			continue
		}
		now[pid] = seen[pid] + 1
		if now[pid] >= orphanTicks {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil) // ECHILD: its waiter was quicker
			delete(now, pid)
		}
	}
	return now
}

// children lists this process's children, from every thread's /proc children file (each lists
// the children that thread forked or inherited).
func children() []int {
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(field)); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// zombie reports whether pid has exited and waits to be reaped, from /proc/PID/stat's state,
// the field after the last ')' (the command name may hold any byte).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
