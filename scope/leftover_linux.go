package scope

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/custody-dev/custody/procid"
	"golang.org/x/sys/unix"
)

// leftovers lists the owner directories in this process's cgroup base, made in its PID namespace,
// whose owner is provably dead. The directory's name is the owner's incarnation (pid and start ticks); cgroups do not
// outlive a boot, so a PID that is gone, or names another start, proves the owner dead.
func leftovers() ([]Leftover, error) {
	h, err := findHierarchy()
	if err != nil {
		return nil, nil // no cgroups, no leftovers
	}
	base := h.own
	if base == "/" {
		base = "/custody"
	}
	ents, err := os.ReadDir(h.dir(base))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("scope: leftovers: %w", err)
	}
	ns, err := pidNamespace()
	if err != nil {
		return nil, fmt.Errorf("scope: leftovers: %w", err)
	}
	var out []Leftover
	for _, e := range ents {
		m := matchOwnerDir(e.Name())
		if m == nil || !e.IsDir() || m[1] != strconv.FormatUint(ns, 10) {
			continue // another PID namespace's owner: its PID means nothing here
		}
		owner, dead := deadOwner(m)
		if !dead {
			continue // alive, or unknown: keep
		}
		rel := filepath.Join(base, e.Name())
		cg, err := openCgroup(h, rel)
		if err != nil {
			continue
		}
		pop, err := cg.populated()
		cg.close()
		if err == nil {
			out = append(out, Leftover{Cgroup: rel, Owner: owner, Populated: pop})
		}
	}
	return out, nil
}

// deadOwner reads an owner directory's name, matched by matchOwnerDir, and reports whether its
// owner is provably dead: its PID is gone (a zombie is dead) or names another start.
func deadOwner(m []string) (procid.ID, bool) {
	pid, _ := strconv.Atoi(m[2])
	start, _ := strconv.ParseUint(m[3], 10, 64)
	inc, err := procid.Read(pid)
	return procid.ID{PID: pid, Start: start}, err == nil && inc.Start != start || errors.Is(err, procid.ErrGone)
}

func removeDeadOwner(ctx context.Context, rel string) error {
	if !isScopeName(filepath.Base(rel)) {
		return fmt.Errorf("scope: remove the owner of %s: not a scope in an owner's directory", rel)
	}
	return removeDeadOwnerDir(ctx, filepath.Dir(rel))
}

func removeDeadOwnerDir(ctx context.Context, dir string) error {
	m := matchOwnerDir(filepath.Base(dir))
	if m == nil {
		return fmt.Errorf("scope: remove %s: not an owner's directory", dir)
	}
	// An owner of another PID namespace: its PID means nothing here.
	if ns, err := pidNamespace(); err != nil || m[1] != strconv.FormatUint(ns, 10) {
		return err
	}
	if !awaitDeadOwner(ctx, m) {
		return nil
	}
	return removeLeftover(Leftover{Cgroup: dir})
}

// awaitDeadOwner reports whether the owner of a directory whose name matchOwnerDir matched is
// provably dead, waiting until ctx is done for an owner whose exit has begun but not ended: a
// process closes its files (and its supervisor sees its pipe end) before it becomes a zombie.
func awaitDeadOwner(ctx context.Context, m []string) bool {
	owner, dead := deadOwner(m)
	if dead || ctx.Err() != nil {
		return dead
	}
	fd, err := unix.PidfdOpen(owner.PID, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH) // gone since the look
	}
	defer unix.Close(fd)
	// The pidfd names whatever had the PID when it was opened; still the owner's start after
	// it, it is the owner's (the owner held the PID from before the open until after it).
	if _, dead := deadOwner(m); dead {
		return true
	}
	for ctx.Err() == nil {
		ms := 100
		if dl, ok := ctx.Deadline(); ok {
			ms = int(min(time.Until(dl), 100*time.Millisecond).Milliseconds())
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(ms, 0))
		if n > 0 {
			return true // POLLIN: it has exited
		}
		if err != nil && err != unix.EINTR {
			return false
		}
	}
	return false
}

func removeLeftover(l Leftover) error {
	h, err := findHierarchy()
	if err != nil {
		return err
	}
	if matchOwnerDir(filepath.Base(l.Cgroup)) == nil {
		return fmt.Errorf("scope: remove %s: not an owner's directory", l.Cgroup)
	}
	var st unix.Stat_t
	if err := unix.Stat(h.dir(l.Cgroup), &st); err != nil {
		return nil // removed meanwhile
	}
	if err := removeTree(h.dir(l.Cgroup), st.Ino); err != nil {
		return fmt.Errorf("scope: remove leftover %s: %w", l.Cgroup, err)
	}
	return nil
}
