package scope

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// Where custody makes its cgroups:
//
//	caller's cgroup          base                         an owner's scopes
//	the hierarchy's root     <mount>/custody              <base>/custody-<ns>-<pid>-<start>/s<n>
//	(root, no systemd)
//	any other, writable      that cgroup itself           (same)
//	(a delegated subtree, or a custody scope: a nested owner)
//
// <pid>-<start> is the owner's incarnation (start ticks), unique within a boot in its PID namespace
// <ns> (the inode of /proc/self/ns/pid), so reap, in the same namespace, can tell a dead owner's
// leftovers; a reaper in another namespace, where the PID means another process, leaves them. A nested owner runs inside a scope of its outer owner, so its scopes
// are cgroups below that scope: the outer teardown, by cgroup.kill, reaches them, and its own
// touches only its subtree.

// hierarchy is the cgroup v2 hierarchy as this process sees it.
type hierarchy struct {
	mount string // where cgroup2 is mounted
	root  string // the hierarchy path the mount shows ("/" unless a subtree is bind-mounted)
	own   string // this process's cgroup, a hierarchy path
}

// dir returns the file system path of a hierarchy path.
func (h hierarchy) dir(rel string) string {
	return filepath.Join(h.mount, strings.TrimPrefix(rel, h.root))
}

// relOf returns the hierarchy path of a file system path under the mount.
func (h hierarchy) relOf(path string) (string, bool) {
	path = filepath.Clean(path)
	if path != h.mount && !strings.HasPrefix(path, h.mount+"/") {
		return "", false
	}
	return filepath.Join(h.root, strings.TrimPrefix(path, h.mount)), true
}

var findHierarchy = sync.OnceValues(readHierarchy)

func readHierarchy() (hierarchy, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return hierarchy{}, fmt.Errorf("read own cgroup: %w", err)
	}
	own, ok := unifiedPath(b)
	if !ok {
		return hierarchy{}, errors.New("this process is in no cgroup v2 hierarchy (no 0:: line in /proc/self/cgroup)")
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return hierarchy{}, fmt.Errorf("read mountinfo: %w", err)
	}
	h, ok := cgroup2Mount(mi, own)
	if !ok {
		return hierarchy{}, errors.New("no cgroup2 file system is mounted where this process's cgroup shows")
	}
	h.own = own
	return h, nil
}

// unifiedPath returns the cgroup v2 path of a /proc/PID/cgroup file: its "0::" line.
func unifiedPath(b []byte) (string, bool) {
	for line := range bytes.Lines(b) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(bytes.TrimSpace(p)), true
		}
	}
	return "", false
}

// cgroup2Mount finds, in a mountinfo file, a cgroup2 mount whose root contains own.
// A mountinfo line: id parent major:minor root mountpoint options [optional...] - fstype source super.
func cgroup2Mount(mountinfo []byte, own string) (hierarchy, bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		root, mount := unescapeMount(f[3]), unescapeMount(f[4])
		if root == "/" || own == root || strings.HasPrefix(own, root+"/") {
			return hierarchy{mount: mount, root: root}, true
		}
	}
	return hierarchy{}, false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// matchOwnerDir matches the name of the directory of one owner's scopes,
// custody-<ns>-<pid>-<start> with each field one or more ASCII digits, and returns the name and
// its three fields, or nil: the shape of a regexp's FindStringSubmatch, without the regexp, whose
// compilation at init was 0.05-0.08 ms of every custody process's start (the supervisor's and the
// gate's too).
func matchOwnerDir(name string) []string {
	rest, ok := strings.CutPrefix(name, "custody-")
	if !ok {
		return nil
	}
	fields := strings.Split(rest, "-")
	if len(fields) != 3 || !digits(fields[0]) || !digits(fields[1]) || !digits(fields[2]) {
		return nil
	}
	return append([]string{name}, fields...)
}

// isScopeName reports whether name is that of one scope in an owner's directory: s<N>, N one or
// more ASCII digits.
func isScopeName(name string) bool {
	n, ok := strings.CutPrefix(name, "s")
	return ok && digits(n)
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// isScopePath reports whether a hierarchy path names a scope custody made: a scope directory in
// an owner's directory. Only such cgroups are rebuilt from rows: a stop may touch one cgroup
// custody created, never one a row merely names.
func isScopePath(rel string) bool {
	dir, name := filepath.Split(filepath.Clean(rel))
	return isScopeName(name) && matchOwnerDir(filepath.Base(dir)) != nil
}

// owner is this process's directory of scopes, made at its first scope.
type owner struct {
	mu      sync.Mutex
	h       hierarchy
	rel     string // the owner directory, a hierarchy path
	made    bool
	sd      sdScope // the unit systemd delegated to this process, once it did (see delegateLocked)
	scopes  int     // scopes made so far: the next is s<scopes+1>
	live    int     // scopes made and not yet removed
	lastErr error
}

var self owner

// ensure makes the owner directory and proves everything a cgroup scope needs, or says why
// children get process groups instead. It is retried at each start rather than remembered: a
// delegated subtree can appear later (and a transient error should not disable cgroups for the
// process's life).
func (o *owner) ensureLocked() error { return o.ensureDryLocked(false) }

// ensureDryLocked is ensureLocked; with dry it asks systemd for nothing (see delegateLocked).
func (o *owner) ensureDryLocked(dry bool) error {
	if err := forcedGroups(); err != nil {
		return err
	}
	if o.made {
		return nil
	}
	h, err := o.hierarchyLocked()
	if err != nil {
		return err
	}
	if err := probeClone3(); err != nil {
		return err
	}
	base := h.own
	if base == "/" { // the hierarchy's root holds only processes the system started
		base = "/custody"
		if err := unix.Mkdir(h.dir(base), 0o755); err != nil && err != unix.EEXIST {
			return fmt.Errorf("cgroup %s (below the hierarchy's root, where this process runs) is not writable by uid %d: %w", h.dir(base), os.Geteuid(), err)
		}
	} else {
		var asks bool
		if h, asks, err = o.delegateLocked(h, dry); err != nil || asks {
			return err // asks: a start would ask for a scope, and make its directory there
		}
		base = h.own
	}
	me, err := procid.Self()
	if err != nil {
		return err
	}
	ns, err := pidNamespace()
	if err != nil {
		return err
	}
	rel := filepath.Join(base, fmt.Sprintf("custody-%d-%d-%d", ns, me.PID, me.Start))
	if err := unix.Mkdir(h.dir(rel), 0o755); err != nil && err != unix.EEXIST {
		return fmt.Errorf("cgroup %s is not writable by uid %d: %w", h.dir(base), os.Geteuid(), err)
	}
	if _, err := os.Stat(filepath.Join(h.dir(rel), "cgroup.kill")); err != nil {
		unix.Rmdir(h.dir(rel))
		return fmt.Errorf("the kernel has no cgroup.kill (Linux 5.14): %w", err)
	}
	o.h, o.rel, o.made = h, rel, true
	return nil
}

// newScope makes and opens the cgroup of one new scope.
func (o *owner) newScope() (*cgroup, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.ensureLocked(); err != nil {
		o.lastErr = err
		return nil, err
	}
	o.scopes++
	rel := filepath.Join(o.rel, "s"+strconv.Itoa(o.scopes))
	err := unix.Mkdir(o.h.dir(rel), 0o755)
	if err == unix.ENOENT { // another process removed the directory when it emptied: make it again
		o.made = false
		if err = o.ensureLocked(); err == nil {
			err = unix.Mkdir(o.h.dir(rel), 0o755)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("scope: make cgroup: %w", &os.PathError{Op: "mkdir", Path: o.h.dir(rel), Err: err})
	}
	cg, err := openCgroup(o.h, rel)
	if err != nil {
		unix.Rmdir(o.h.dir(rel))
		return nil, err
	}
	cg.made = o
	o.live++
	return cg, nil
}

// removed counts a scope's cgroup removed. The owner directory stays while the owner is active,
// even empty: making it again at the next start would put its mkdir, and the proofs ensureLocked
// makes, on every start's path. An owner closed or gone idle removes it (releaseOwnerDir); once
// the owner is dead its supervisor removes it, and reap removes what is left of a dead owner (see
// leftovers).
func (o *owner) removed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.live--
}

// releaseOwnerDir removes the owner directory while no scope made in it lives (see
// ReleaseOwnerDir). Under the lock no scope is being made meanwhile; a start after it finds the
// directory gone and makes it again (newScope). A directory that still holds a cgroup (one this
// process did not make) stays.
func releaseOwnerDir() {
	self.mu.Lock()
	defer self.mu.Unlock()
	if !self.made || self.live > 0 {
		return
	}
	if unix.Rmdir(self.h.dir(self.rel)) == nil {
		self.made = false
	}
}

// pidNamespace returns the inode number of this process's PID namespace: the namespace in which
// an owner directory's PID means its owner.
func pidNamespace() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("pid namespace: %w", &os.PathError{Op: "stat", Path: "/proc/self/ns/pid", Err: err})
	}
	return st.Ino, nil
}

// forcedGroups says why, when $CUSTODY_CONTAINMENT asks for process groups.
func forcedGroups() error {
	if os.Getenv(EnvContainment) == KindGroup.Containment() {
		return fmt.Errorf("$%s=%s asks for process groups", EnvContainment, KindGroup.Containment())
	}
	return nil
}

// probeClone3 checks that clone3(2) can be called: CLONE_INTO_CGROUP needs it, and a seccomp
// filter (older container runtimes) answers ENOSYS or EPERM. With a NULL argument of size 0 a
// working clone3 fails with EINVAL and creates nothing.
func probeClone3() error {
	_, _, e := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	if e == unix.EINVAL {
		return nil
	}
	return fmt.Errorf("clone3 is unavailable (CLONE_INTO_CGROUP needs it): %w", os.NewSyscallError("clone3", e))
}

func ownerDir() string {
	if kind, _, _ := containment(); kind != KindCgroup {
		return ""
	}
	self.mu.Lock()
	defer self.mu.Unlock()
	return self.rel
}

func containment() (Kind, string, error) {
	o := &self
	o.mu.Lock()
	defer o.mu.Unlock()
	fresh := !o.made
	if err := o.ensureDryLocked(true); err != nil {
		return KindGroup, "", err
	}
	if !o.made { // a start asks the user manager for a delegated scope first (see delegateLocked)
		return KindCgroup, "custody-<pid>-<start>.scope (a transient systemd scope, Delegate=yes, asked for at the first start)", nil
	}
	if fresh && o.live == 0 { // made only to prove it can be: leave nothing behind
		unix.Rmdir(o.h.dir(o.rel))
		o.made = false
	}
	return KindCgroup, o.h.dir(filepath.Dir(o.rel)), nil
}
