package scope

// Cgroups delegated by systemd. Where custody cannot make its cgroups in the caller's own
// cgroup, or must not (systemd manages it and did not delegate it), it asks the user manager
// for a transient unit with Delegate=yes and makes them there:
//
//	the caller's cgroup                      what custody asks for         cgroup_via
//	the user's (a desktop terminal's scope)  a transient scope holding     systemd-scope
//	                                         this process, then its
//	                                         owner directory inside it
//	not the user's (an SSH session's         nothing here: the manager     (a service, asked
//	root-owned session-N.scope)              cannot move this process;     for by custody run:
//	                                         see ErrNeedsService           systemd-service)
//
// systemd's rule (docs/CGROUP_DELEGATION.md): below a unit's cgroup only systemd writes, unless
// the unit has Delegate=yes, which systemd marks with the extended attribute trusted.delegate
// (the system manager) or user.delegate (a user manager, and the system manager since 251 for
// readers without CAP_SYS_ADMIN, who cannot read trusted.*). A writable cgroup proves nothing: a
// user manager makes every cgroup of its tree the user's.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/custody-dev/custody/internal/sdunit"
	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// sdAskTimeout bounds a question to the user manager: a manager that does not answer within it
// is as good as none, and the child gets a process group rather than waiting.
const sdAskTimeout = 5 * time.Second

// sdScope is the scope this process had from systemd: the unit, and the hierarchy as seen
// from inside it once this process was moved there.
type sdScope struct {
	unit string
	h    hierarchy
}

// hierarchyLocked is the hierarchy as this process sees it now: inside the unit it was moved
// into, once it was (findHierarchy read it once, before).
func (o *owner) hierarchyLocked() (hierarchy, error) {
	if o.sd.unit != "" {
		return o.sd.h, nil
	}
	return findHierarchy()
}

// delegateLocked returns the hierarchy in which this process may make its cgroups, asking the
// user manager for a delegated scope (and moving this process into it) where the caller's
// cgroup is not usable as it is. With dry it asks for nothing, and reports whether a start would
// (custody doctor asks without moving itself).
func (o *owner) delegateLocked(h hierarchy, dry bool) (_ hierarchy, wouldAsk bool, _ error) {
	if o.sd.unit != "" {
		return h, false, nil // the scope this process was moved into, read back delegated then
	}
	unit, why := undelegated(h)
	if why == nil {
		return h, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sdAskTimeout)
	defer cancel()
	c, err := sdunit.Dial(ctx)
	if err != nil {
		switch {
		case unit != "" && !sdBooted():
			// Named like a unit, writable, and no systemd anywhere to ask or to confuse: a
			// cgroup some other manager (or a test) made, and custody's to write.
			return h, false, nil
		case unit != "" && os.Geteuid() == 0:
			// Root with no user manager (sudo in a session, a system service): the system
			// manager would be the one to ask, and custody does not ask it yet; root keeps
			// writing below its unit as before rather than lose cgroups (see docs/design.md).
			return h, false, nil
		}
		return h, false, fmt.Errorf("%v, and %w", why, err)
	}
	defer c.Close()
	if unit != "" {
		// systemd 252's user manager marks no delegated unit with user.delegate: its word is
		// the manager's Delegate property. A unit it does not know is not its to delegate.
		if d, err := c.Delegated(ctx, filepath.Base(unit)); err == nil && d {
			return h, false, nil
		}
	}
	if !ownedByUser(h.dir(h.own)) {
		return h, false, fmt.Errorf("%w: %v, and the user manager cannot move this process out of it", ErrNeedsService, why)
	}
	if dry {
		return h, true, nil
	}
	me, err := procid.Self()
	if err != nil {
		return h, false, err
	}
	name := fmt.Sprintf("custody-%d-%d.scope", me.PID, me.Start)
	if err := c.StartScope(ctx, name, me.PID); err != nil {
		return h, false, fmt.Errorf("%v, and the user manager gave no delegated scope: %w", why, err)
	}
	nh, err := readHierarchy()
	if err != nil {
		return h, false, err
	}
	if d, err := c.Delegated(ctx, name); filepath.Base(nh.own) != name || err != nil || !d {
		return h, false, fmt.Errorf("the user manager started %s with Delegate=yes, but this process is in %s (delegated: %v, %v)", name, nh.own, d, err)
	}
	o.sd = sdScope{unit: name, h: nh}
	return nh, false, nil
}

// undelegated says why custody must not make cgroups below the caller's own as it is: it is not
// writable, or it is below a systemd unit's cgroup (unit, a hierarchy path) that carries no
// delegation mark. nil when it may.
func undelegated(h hierarchy) (unit string, why error) {
	dir := h.dir(h.own)
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK, unix.AT_EACCESS); err != nil {
		return "", fmt.Errorf("own cgroup %s is not writable: %w", dir, err)
	}
	unit, ok := unitOf(h.own)
	if !ok || delegated(h.dir(unit)) || inOwnerDir(unit, h.own) {
		return "", nil
	}
	return unit, fmt.Errorf("own cgroup %s is systemd unit %s's, which is not marked delegated (user.delegate, trusted.delegate)", dir, filepath.Base(unit))
}

// inOwnerDir reports whether rel lies in a custody owner directory below unit: a nested owner's
// cgroup, inside a scope of an outer owner that was custody's to make there (the unit was
// delegated to it, or it could write there), and so this owner's to write below.
func inOwnerDir(unit, rel string) bool {
	rest, ok := strings.CutPrefix(rel, unit+"/")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	return matchOwnerDir(first) != nil
}

// sdBooted reports whether systemd runs this system (sd_booted(3): /run/systemd/system exists).
func sdBooted() bool {
	_, err := os.Lstat("/run/systemd/system")
	return err == nil
}

// unitOf returns the hierarchy path of the innermost systemd unit that holds processes (a
// scope or a service) on the path rel, and whether there is one. Slices hold no processes.
func unitOf(rel string) (string, bool) {
	for p := filepath.Clean(rel); p != "/" && p != "."; p = filepath.Dir(p) {
		if b := filepath.Base(p); strings.HasSuffix(b, ".scope") || strings.HasSuffix(b, ".service") {
			return p, true
		}
	}
	return "", false
}

// delegated reports whether the cgroup directory carries systemd's delegation mark.
func delegated(dir string) bool {
	for _, name := range [...]string{"user.delegate", "trusted.delegate"} {
		var v [8]byte
		if n, err := unix.Getxattr(dir, name, v[:]); err == nil && string(v[:n]) == "1" {
			return true
		}
	}
	return false
}

// ownedByUser reports whether the cgroup's cgroup.procs is this user's: whether the user manager
// (running as the user) can move a process out of it.
func ownedByUser(dir string) bool {
	var st unix.Stat_t
	return unix.Stat(filepath.Join(dir, "cgroup.procs"), &st) == nil && int(st.Uid) == os.Geteuid()
}

// cgroupVia names how this process's cgroups were had, where not in a subtree it could write
// itself: "systemd-scope" or "systemd-service" when they are inside a unit custody asked the
// user manager for (this process's own, or one an outer owner asked for: an agent in a service,
// or an owner nested in either), else "". It is a description, read from the unit's name
// (custody-*.scope, custody-*.service), and licenses nothing.
func cgroupVia() string {
	self.mu.Lock()
	h, err := self.hierarchyLocked()
	self.mu.Unlock()
	if err != nil {
		return ""
	}
	unit, ok := unitOf(h.own)
	switch name := filepath.Base(unit); {
	case !ok || !strings.HasPrefix(name, "custody-"):
		return ""
	case strings.HasSuffix(name, ".service"):
		return sdunit.ViaService
	}
	return sdunit.ViaScope
}

func delegation() (string, error) {
	if via := cgroupVia(); via != "" {
		return via, nil
	}
	self.mu.Lock()
	defer self.mu.Unlock()
	h, err := findHierarchy()
	if err != nil {
		return "", err
	}
	if h.own == "/" {
		return "", errors.New("own cgroup is the hierarchy's root, which no systemd unit holds: cgroups are made below /custody, where root may")
	}
	_, why := undelegated(h)
	nh, asks, err := self.delegateLocked(h, true)
	switch {
	case asks:
		return sdunit.ViaScope, why
	case errors.Is(err, ErrNeedsService):
		return sdunit.ViaService, err
	case err == nil && why != nil:
		return "", fmt.Errorf("%v, but the user manager says it is delegated", why)
	case err == nil:
		return "", fmt.Errorf("own cgroup %s is writable, and no undelegated systemd unit's", nh.dir(nh.own))
	}
	return "", err
}

func needsService() error {
	self.mu.Lock()
	defer self.mu.Unlock()
	if forcedGroups() != nil || self.made || self.sd.unit != "" {
		return nil
	}
	h, err := findHierarchy()
	if err != nil || h.own == "/" {
		return nil
	}
	if _, why := undelegated(h); why == nil || ownedByUser(h.dir(h.own)) {
		return nil
	}
	_, _, err = self.delegateLocked(h, true)
	if errors.Is(err, ErrNeedsService) {
		return err
	}
	return nil
}
