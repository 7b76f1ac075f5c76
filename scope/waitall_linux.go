package scope

// cgroup.events raises POLLPRI (EPOLLPRI in epoll) when its content changes; a read of the file
// through the same open file re-arms it (kernfs compares the file's event count with the count
// its last read saw, so a change between a read and the epoll_ctl is reported at once). The
// kernel sends at most one notification per file every 10 ms, delaying the next: an emptiness
// is seen up to 10 ms late, but the cgroups are waited on at once, so the delays do not add up.
//
// A cgroup's "populated" counts every process below it too: when the cgroups waited on are all
// the subdirectories of one directory (one owner's scopes, as a supervisor sweeping them has),
// the directory's own cgroup.events going to "populated 0" proves every one of them empty at
// once. A sweep waits so on its owner's directory, and wakes once, not once per scope: a
// thousand wake-ups, each a read and an epoll_ctl, were a supervisor's largest cost while its
// signalled processes needed the same CPUs to exit.

import (
	"context"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Rounds over the scopes of a family (see family), which are not watched one by one, begin
// familyRound after the wait begins and double up to familyRoundMax apart. They settle a family
// whose directory does not empty: one that gained a subdirectory that is not waited on after it
// was counted, or that holds processes itself.
const (
	familyRound    = 100 * time.Millisecond
	familyRoundMax = time.Second
)

// waitAll waits on the cgroups whose cgroup.events is held in one epoll, through their parent
// directory's cgroup.events where they are all its subdirectories (see family), and polls the
// others (process groups, cgroups not held, or all of them when epoll fails).
func waitAll(ctx context.Context, ss []*Scope) []*Scope {
	var held, polled []*Scope
	for _, s := range ss {
		if s.holdsEvents() {
			held = append(held, s)
		} else {
			polled = append(polled, s)
		}
	}
	if len(held) == 0 {
		return pollAll(ctx, polled)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return pollAll(ctx, ss)
	}
	defer unix.Close(ep)
	w := &waiter{ep: ep}
	defer w.closeFamilies()
	var unknown []*Scope
	for _, fam := range w.families(held) {
		unknown = w.add(fam, unknown)
	}
	polled, unknown = sortOut(polled, unknown)
	unknown = w.run(ctx, &polled, unknown)
	return append(append(unknown, w.left()...), polled...)
}

// waiter is one waitAll's epoll: each entry's tag is an index in watched (a scope watched on its
// own) or, offset by familyTag, in fams.
type waiter struct {
	ep      int
	watched []*Scope // nil once settled
	fams    []*family
	left1   int // scopes watched on their own and not yet settled
}

// familyTag offsets a family's epoll tag from the scopes' tags.
const familyTag = 1 << 30

// family is the held cgroups waited on below one directory. When they are all its
// subdirectories, the directory's cgroup.events is watched in their stead (events >= 0).
type family struct {
	dir    string
	events int      // the directory's cgroup.events, or -1
	scopes []*Scope // not yet settled; nil once all are
}

// families groups held cgroup scopes by their parent directory. A cgroup cannot move, and a
// directory with a cgroup below it cannot be removed: the directory now at a scope's parent path
// is its parent, or the scope was removed, which needed it empty.
func (w *waiter) families(held []*Scope) []*family {
	byDir := make(map[string]*family)
	var fams []*family
	for _, s := range held {
		dir := filepath.Dir(s.sys.cgroup().path)
		f := byDir[dir]
		if f == nil {
			f = &family{dir: dir, events: -1}
			byDir[dir] = f
			fams = append(fams, f)
		}
		f.scopes = append(f.scopes, s)
	}
	return fams
}

// add starts waiting on a family: on its directory when the family is all its subdirectories
// and the directory is populated (an empty one settles the family with no read of its scopes),
// else on each scope. It returns unknown with the scopes that could not tell appended.
func (w *waiter) add(f *family, unknown []*Scope) []*Scope {
	if f.openEvents() {
		switch empty, err := f.empty(); {
		case err == nil && empty:
			f.settle()
			return unknown
		case err == nil && unix.EpollCtl(w.ep, unix.EPOLL_CTL_ADD, f.events,
			&unix.EpollEvent{Events: unix.EPOLLPRI, Fd: int32(familyTag + len(w.fams))}) == nil:
			w.fams = append(w.fams, f)
			return unknown
		}
		f.closeEvents()
	}
	waiting, unknown := sortOut(f.scopes, unknown)
	f.scopes = nil
	for _, s := range waiting {
		if s.watch(w.ep, int32(len(w.watched))) {
			w.watched = append(w.watched, s)
			w.left1++
		} else {
			unknown = append(unknown, s) // cannot happen with a held file and a valid epoll
		}
	}
	return unknown
}

// run waits until every scope is settled or ctx is done: it reads a watched file when the kernel
// says it changed, goes over the families' scopes in rounds (see familyRound) and once more at
// the end, and polls the scopes in polled (keeping those still populated), from every 1 ms up to
// every 10 ms.
func (w *waiter) run(ctx context.Context, polled *[]*Scope, unknown []*Scope) []*Scope {
	events := make([]unix.EpollEvent, 64)
	start, round := time.Now(), familyRound
	nextRound := start.Add(round)
	for delay := time.Millisecond; w.waiting() || len(*polled) > 0; delay = min(2*delay, 10*time.Millisecond) {
		if ctx.Err() != nil {
			break
		}
		n, err := unix.EpollWait(w.ep, events, w.slice(ctx, delay, len(*polled) > 0, nextRound))
		if err != nil && err != unix.EINTR {
			break // cannot happen with a valid epoll and buffer; the rest is reported not empty
		}
		for _, e := range events[:max(n, 0)] {
			unknown = w.changed(e.Fd, unknown)
		}
		if len(*polled) > 0 {
			*polled, unknown = sortOut(*polled, unknown)
		}
		if !time.Now().Before(nextRound) {
			unknown = w.round(unknown)
			round = min(2*round, familyRoundMax)
			nextRound = time.Now().Add(round)
		}
	}
	return w.round(unknown) // a last look, so that no scope empty by now is reported populated
}

// waiting reports whether a scope is still waited on through the epoll.
func (w *waiter) waiting() bool {
	if w.left1 > 0 {
		return true
	}
	for _, f := range w.fams {
		if f.scopes != nil {
			return true
		}
	}
	return false
}

// slice is how long one epoll_wait may sleep, in milliseconds: until ctx's deadline or the next
// round of the families, 50 ms at most so that a cancellation is seen, and delay when scopes are
// polled too.
func (w *waiter) slice(ctx context.Context, delay time.Duration, polling bool, nextRound time.Time) int {
	d := 50 * time.Millisecond
	if polling {
		d = delay
	}
	if len(w.fams) > 0 {
		d = min(d, time.Until(nextRound))
	}
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return int(max(d, 0).Milliseconds())
}

// changed handles the epoll's report for tag: it reads the scope's or the family directory's
// cgroup.events (which re-arms it) and settles what it proves empty.
func (w *waiter) changed(tag int32, unknown []*Scope) []*Scope {
	if tag >= familyTag {
		f := w.fams[tag-familyTag]
		switch empty, err := f.empty(); {
		case err != nil:
			f.closeEvents() // a removed file reports forever: the rounds settle its scopes
		case empty:
			f.settle()
		}
		return unknown
	}
	if s := w.watched[tag]; s != nil && s.settled(w.ep, &unknown) {
		w.watched[tag] = nil
		w.left1--
	}
	return unknown
}

// round asks each family's scopes once whether they are empty, and settles the family when none
// is populated.
func (w *waiter) round(unknown []*Scope) []*Scope {
	for _, f := range w.fams {
		if f.scopes != nil {
			f.scopes, unknown = sortOut(f.scopes, unknown)
			if len(f.scopes) == 0 {
				f.settle()
			}
		}
	}
	return unknown
}

// left returns the scopes not settled.
func (w *waiter) left() []*Scope {
	var left []*Scope
	for _, s := range w.watched {
		if s != nil {
			left = append(left, s)
		}
	}
	for _, f := range w.fams {
		left = append(left, f.scopes...)
	}
	return left
}

func (w *waiter) closeFamilies() {
	for _, f := range w.fams {
		f.closeEvents()
	}
}

// openEvents opens the family's directory's cgroup.events, if the directory is a cgroup whose
// subdirectories are all the family's scopes: kernfs counts a directory's links as 2 plus its
// subdirectories. A subdirectory made after this count keeps the directory populated while it
// is; the family's rounds settle its scopes then. (Stat_t.Nlink is a uint32 on arm64, arm, 386,
// riscv64, loong64 and mips.)
func (f *family) openEvents() bool {
	dir, err := unix.Open(f.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	var fs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(dir, &fs) != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC ||
		unix.Fstat(dir, &st) != nil || uint64(st.Nlink) != uint64(2+len(f.scopes)) {
		return false
	}
	f.events, err = unix.Openat(dir, "cgroup.events", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	return err == nil
}

// empty reads the family's directory's cgroup.events from its start (which re-arms it).
func (f *family) empty() (bool, error) {
	b, err := readFrom(f.events, "cgroup.events", true)
	if err != nil {
		return false, err
	}
	pop, err := parsePopulated(b)
	return !pop, err
}

// settle ends the wait for every scope of the family (its directory is empty, or so are they),
// and stops watching the directory: closing the file takes it out of the epoll.
func (f *family) settle() {
	f.scopes = nil
	f.closeEvents()
}

func (f *family) closeEvents() {
	if f.events >= 0 {
		unix.Close(f.events)
		f.events = -1
	}
}

// holdsEvents reports whether the scope is a cgroup whose cgroup.events is held open.
func (s *Scope) holdsEvents() bool {
	cg := s.sys.cgroup()
	if cg == nil {
		return false
	}
	return cg.with(func(int) error {
		if cg.heldFile("cgroup.events") < 0 {
			return unix.EBADF
		}
		return nil
	}) == nil
}

// watch adds the scope's held cgroup.events to ep, with index i as its tag, and reports whether
// it did; a scope read once by sortOut just before has re-armed the file.
func (s *Scope) watch(ep int, i int32) bool {
	cg := s.sys.cgroup()
	return cg.with(func(int) error {
		fd := cg.heldFile("cgroup.events")
		if fd < 0 {
			return unix.EBADF
		}
		return unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLPRI, Fd: i})
	}) == nil
}

// settled reads a watched scope after its cgroup.events changed (which re-arms the file) and
// reports whether the wait for it is over: it is empty, or could not tell (appended to unknown).
// A settled scope's file is taken out of ep, whose level-triggered report would repeat.
func (s *Scope) settled(ep int, unknown *[]*Scope) bool {
	empty, err := s.Empty()
	if err != nil {
		*unknown = append(*unknown, s)
	} else if !empty {
		return false
	}
	s.sys.cgroup().with(func(int) error {
		return unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, s.sys.cgroup().heldFile("cgroup.events"), nil)
	})
	return true
}
