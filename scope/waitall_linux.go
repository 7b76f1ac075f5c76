package scope

// cgroup.events raises POLLPRI (EPOLLPRI in epoll) when its content changes; a read of the file
// through the same open file re-arms it (kernfs compares the file's event count with the count
// its last read saw, so a change between a read and the epoll_ctl is reported at once). The
// kernel sends at most one notification per file every 10 ms, delaying the next: an emptiness
// is seen up to 10 ms late, but the cgroups are waited on at once, so the delays do not add up.

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// waitAll waits on the cgroups whose cgroup.events is held in one epoll, and polls the others
// (process groups, cgroups not held, or all of them when epoll fails).
func waitAll(ctx context.Context, ss []*Scope) []*Scope {
	waiting, unknown := sortOut(ss, nil)
	if len(waiting) == 0 {
		return unknown
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return append(unknown, pollAll(ctx, waiting)...)
	}
	defer unix.Close(ep)
	var watched, polled []*Scope
	for _, s := range waiting {
		if s.watch(ep, int32(len(watched))) {
			watched = append(watched, s)
		} else {
			polled = append(polled, s)
		}
	}
	left := len(watched)
	events := make([]unix.EpollEvent, 64)
	for delay := time.Millisecond; (left > 0 || len(polled) > 0) && ctx.Err() == nil; delay = min(2*delay, 10*time.Millisecond) {
		n, err := unix.EpollWait(ep, events, waitSlice(ctx, delay, len(polled) > 0))
		if err != nil && err != unix.EINTR {
			break // cannot happen with a valid epoll and buffer; the rest is reported not empty
		}
		for _, e := range events[:max(n, 0)] {
			if s := watched[e.Fd]; s != nil && s.settled(ep, &unknown) {
				watched[e.Fd] = nil
				left--
			}
		}
		if len(polled) > 0 {
			polled, unknown = sortOut(polled, unknown)
		}
	}
	for _, s := range watched {
		if s != nil {
			unknown = append(unknown, s)
		}
	}
	return append(unknown, polled...)
}

// waitSlice is how long one epoll_wait may sleep, in milliseconds: until ctx's deadline, 50 ms at
// most so that a cancellation is seen, and delay when scopes are polled too.
func waitSlice(ctx context.Context, delay time.Duration, polling bool) int {
	d := 50 * time.Millisecond
	if polling {
		d = delay
	}
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return int(max(d, 0).Milliseconds())
}

// watch adds the scope's held cgroup.events to ep, with index i as its tag, and reports whether
// it did; a scope read once by sortOut just before has re-armed the file.
func (s *Scope) watch(ep int, i int32) bool {
	cg := s.sys.cg
	if cg == nil {
		return false
	}
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
	s.sys.cg.with(func(int) error {
		return unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, s.sys.cg.heldFile("cgroup.events"), nil)
	})
	return true
}
