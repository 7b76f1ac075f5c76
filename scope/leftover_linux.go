package scope

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

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
		m := ownerDirName.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() || m[1] != strconv.FormatUint(ns, 10) {
			continue // another PID namespace's owner: its PID means nothing here
		}
		pid, _ := strconv.Atoi(m[2])
		start, _ := strconv.ParseUint(m[3], 10, 64)
		if inc, err := procid.Read(pid); err == nil && inc.Start == start || err != nil && !errors.Is(err, procid.ErrGone) {
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
			out = append(out, Leftover{Cgroup: rel, Owner: procid.ID{PID: pid, Start: start}, Populated: pop})
		}
	}
	return out, nil
}

func removeLeftover(l Leftover) error {
	h, err := findHierarchy()
	if err != nil {
		return err
	}
	if !ownerDirName.MatchString(filepath.Base(l.Cgroup)) {
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
