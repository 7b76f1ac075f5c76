package scope

// The environment sweep: the process-group path's reach beyond the group.
//
// A process group does not hold a descendant that calls setsid(2) or setpgid(2). Each scope
// therefore also gets an id of its own in its child's environment ($CUSTODY_SCOPE, beside the
// spawn tag), which every descendant inherits unless it execs with another environment. A sweep
// finds the processes of one user whose environment (the block the kernel recorded at their
// exec: /proc/PID/environ on Linux, sysctl KERN_PROCARGS2 on macOS) carries the id, and proves
// each before it signals it:
//
//	Linux   pidfd_open, then the environment and the owner read again and the pidfd found still
//	        alive (pidfd_send_signal 0): the process read is the one the pidfd names, whatever
//	        became of its PID; every signal goes through the pidfd
//	macOS   no pidfd: the process's start (kinfo_proc p_starttime) read at the scan is checked
//	        again immediately before each kill(2), which leaves a window of microseconds
//
// Never init, the caller or its ancestors, nor a kernel thread (see authority.Guard). What still
// escapes: a process that both left the group and exec'd with an environment without the id (env
// -i, an execve with a fresh environment); on Linux, also a process of another user (a setuid
// program), and one whose environment block cannot be read (a non-dumpable process of the same
// user, such as one that called prctl(PR_SET_DUMPABLE, 0)). A process that only unsets the
// variable (unsetenv, clearenv) keeps it in the recorded block, and is found.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/custody-dev/custody/procid"
)

// EnvScopeID names the environment variable that carries a scope's id to its child and every
// descendant that keeps its environment: a comma-separated list of ids, the outermost scope's
// first, so that a nested owner's descendants carry every enclosing scope's id.
const EnvScopeID = "CUSTODY_SCOPE"

// NewEnvID returns a new scope id: 32 lower-case hex digits from the system's random source, so
// that no other scope, of this boot or another, carries it.
func NewEnvID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b[:])
}

// ValidEnvID reports whether id has the form [NewEnvID] makes. A sweep for anything else (an
// empty id would match every process carrying an empty list) is refused.
func ValidEnvID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// StampEnvID returns env with id appended to the list in its last EnvScopeID entry (the one
// os/exec gives the child), or with a new entry holding id alone.
func StampEnvID(env []string, id string) []string {
	prefix := EnvScopeID + "="
	list := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, prefix) {
			list = kv[len(prefix):]
		}
	}
	if list != "" {
		list += ","
	}
	return append(env, prefix+list+id)
}

// EnvIDOf returns the scope id [StampEnvID] gave env: the last id of its last EnvScopeID entry,
// or "" when it has none.
func EnvIDOf(env []string) string {
	prefix := EnvScopeID + "="
	id := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, prefix) {
			list := kv[len(prefix):]
			id = list[strings.LastIndexByte(list, ',')+1:]
		}
	}
	if !ValidEnvID(id) {
		return ""
	}
	return id
}

// carries reports whether an environment block (NUL-separated KEY=VALUE entries) has an
// EnvScopeID entry whose list holds one of ids. Every entry of that name counts: a program may put
// several in its exec, and the one a libc's getenv finds is not the only one a child inherits.
func carries(block []byte, ids []string) bool {
	key := []byte(EnvScopeID + "=")
	for len(block) > 0 {
		entry := block
		if i := bytes.IndexByte(block, 0); i >= 0 {
			entry, block = block[:i], block[i+1:]
		} else {
			block = nil
		}
		if !bytes.HasPrefix(entry, key) {
			continue
		}
		for list := entry[len(key):]; len(list) > 0; {
			item := list
			if i := bytes.IndexByte(list, ','); i >= 0 {
				item, list = list[:i], list[i+1:]
			} else {
				list = nil
			}
			for _, id := range ids {
				if string(item) == id {
					return true
				}
			}
		}
	}
	return false
}

// Strays are the processes of one user found carrying a scope id in their environment, each
// held by the strongest handle the OS offers (a pidfd on Linux; on macOS the start read at the
// scan, checked before each signal). Its methods are safe for concurrent use.
type Strays struct {
	ids []string
	uid int

	mu    sync.Mutex
	procs map[int]*stray // by PID
	last  os.Signal      // the last signal sent, for strays found later
}

// FindStrays returns the processes running as uid whose environment carries one of the scope ids
// (one scan for all of them), each
// proven (see the file comment), never init, the caller, its ancestors or a kernel thread. A
// process that cannot be read is left out. On Windows and other systems without a way to read
// another process's environment: an error wrapping [errors.ErrUnsupported].
func FindStrays(ids []string, uid int) (*Strays, error) {
	for _, id := range ids {
		if !ValidEnvID(id) {
			return nil, fmt.Errorf("scope: sweep for scope id %q: not a scope id", id)
		}
	}
	s := &Strays{ids: slices.Clone(ids), uid: uid, procs: map[int]*stray{}}
	if err := s.rescan(); err != nil {
		return nil, err
	}
	return s, nil
}

// rescan adds the strays a scan finds now to those held.
func (s *Strays) rescan() error {
	if len(s.ids) == 0 {
		return nil
	}
	found, err := findStrays(s.ids, s.uid, func(pid int) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, held := s.procs[pid]
		return held
	})
	if err != nil {
		return fmt.Errorf("scope: sweep for scope ids %s: %w", strings.Join(s.ids, ","), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range found {
		s.procs[p.pid] = p
	}
	return nil
}

// Len reports how many strays are held and not yet seen to exit.
func (s *Strays) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
	return len(s.procs)
}

// PIDs returns the PIDs of the strays held and not yet seen to exit.
func (s *Strays) PIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
	pids := make([]int, 0, len(s.procs))
	for pid := range s.procs {
		pids = append(pids, pid)
	}
	return pids
}

// pruneLocked lets go of the strays that have exited.
func (s *Strays) pruneLocked() {
	for pid, p := range s.procs {
		if p.exited() {
			p.close()
			delete(s.procs, pid)
		}
	}
}

// Signal sends sig to every stray held, through its handle, and returns the first error other
// than the stray being gone; sig is also sent to strays found by later rescans (see Wait).
func (s *Strays) Signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = sig
	var first error
	for pid, p := range s.procs {
		err := p.signal(sig)
		switch {
		case errors.Is(err, procid.ErrGone):
			p.close()
			delete(s.procs, pid)
		case err != nil && first == nil:
			first = fmt.Errorf("scope: signal pid %d, which carries a scope id: %w", pid, err)
		}
	}
	return first
}

// Wait waits until every stray held has exited and a last scan finds no new one, or ctx is done.
// A stray found by that scan (a fork during the grace) is sent the last signal and waited for
// too.
func (s *Strays) Wait(ctx context.Context) error {
	for {
		if err := s.waitHeld(ctx); err != nil {
			return err
		}
		if err := s.rescan(); err != nil {
			return err
		}
		s.mu.Lock()
		n, last := len(s.procs), s.last
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		if last != nil {
			s.Signal(last)
		}
	}
}

// waitHeld polls the held strays, every 1 ms up to every 10 ms, until every one has exited.
func (s *Strays) waitHeld(ctx context.Context) error {
	for d := time.Millisecond; ; d = min(2*d, 10*time.Millisecond) {
		if s.Len() == 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("scope: wait for %d processes carrying a scope id: %w", s.Len(), context.Cause(ctx))
		case <-t.C:
		}
	}
}

// Close lets go of every handle held. Idempotent.
func (s *Strays) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, p := range s.procs {
		p.close()
		delete(s.procs, pid)
	}
}

// askSignal is what [Swept.Ask] sends the strays: the request to exit, as a Unix scope's Ask.
var askSignal os.Signal = syscall.SIGTERM

// Swept is a scope together with the strays its id names: what a stop on the process-group path
// acts on. Ask, Signal and Wait act on both, in that order; the scope may be nil (its group is
// gone) and the strays are looked for at the first Ask or Signal. It reports the scope gone
// (procid.ErrGone) only when the strays are gone too.
type Swept struct {
	scope  *Scope // nil when its group is gone
	id     string
	uid    int
	strays *Strays
	err    error // why no strays could be looked for
}

// Sweep returns s with the strays carrying id in their environment, running as uid. s may be nil.
func Sweep(s *Scope, id string, uid int) *Swept { return &Swept{scope: s, id: id, uid: uid} }

// find looks for the strays once.
func (w *Swept) find() {
	if w.strays == nil && w.err == nil {
		w.strays, w.err = FindStrays([]string{w.id}, w.uid)
	}
}

// Ask sends the scope its request (see [Scope.Ask]) and SIGTERM to each stray.
func (w *Swept) Ask() (string, error) {
	req, err := "SIGTERM", error(procid.ErrGone)
	if w.scope != nil {
		req, err = w.scope.Ask()
	}
	return req, w.also(err, askSignal)
}

// Signal sends sig to the scope and to each stray.
func (w *Swept) Signal(sig os.Signal) error {
	err := error(procid.ErrGone)
	if w.scope != nil {
		err = w.scope.Signal(sig)
	}
	return w.also(err, sig)
}

// also sends sig to the strays after the scope answered err, and combines the two. A refusal of
// the scope (no authority, permission denied) signals nothing more: the stop's outcome will say
// that nothing was signalled, or that the OS refused, and a stray signalled meanwhile would make
// it claim less than happened. A scope that is gone gives way to the strays: their signal's error,
// nil when they all took it; the scope's gone when there were none.
func (w *Swept) also(err error, sig os.Signal) error {
	if err != nil && !errors.Is(err, procid.ErrGone) {
		return err
	}
	w.find()
	if w.strays == nil {
		return err
	}
	held := w.strays.Len() // before the signal, which may end them at once
	serr := w.strays.Signal(sig)
	if err == nil || held == 0 {
		// A stray that refused stays held: the wait after it sees it live, and the stop says so.
		return err
	}
	return serr
}

// Wait waits for the scope to empty and every stray to exit.
func (w *Swept) Wait(ctx context.Context) error {
	if w.scope != nil {
		if err := w.scope.Wait(ctx); err != nil {
			return err
		}
	}
	if w.strays == nil {
		return nil
	}
	return w.strays.Wait(ctx)
}

// Strays returns the strays found, or nil before the first Ask or Signal or when none could be
// looked for.
func (w *Swept) Strays() *Strays { return w.strays }

// Close lets go of the strays' handles; the scope is the caller's.
func (w *Swept) Close() {
	if w.strays != nil {
		w.strays.Close()
	}
}
