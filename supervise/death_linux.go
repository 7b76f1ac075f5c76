package supervise

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The owner's death, told at its start.
//
// A supervisor learns of its owner's death from the end of its pipe, and Linux closes a dying
// process's files only after it has torn down its memory: 0.7–2 ms for a small Go program, more
// for a large one, while the scopes it owned still run. The kernel marks a dying thread's robust
// futexes at the start of its exit instead (do_exit → exit_mm → futex_exit_release →
// exit_robust_list, before the memory goes): each word the thread holds gets FUTEX_OWNER_DIED,
// and one waiter is woken, across processes when the word lies in memory they share.
//
// So an owner keeps one page shared with its supervisors (a memfd): a word per supervisor, each
// holding the id of one thread of the owner's that does nothing but hold them, listed in that
// thread's robust list. The thread never returns to Go code: it ends only when the whole process
// does (a kill, an exit, a crash, an exec all end every thread), so a word marked OWNER_DIED means
// that the owner is dying, and its supervisor need not wait for its files to close.
//
// The page's layout: the robust list head at offset 0 (next, futex_offset, list_op_pending), then
// deathSlots entries of deathEntry bytes, each a next pointer followed by its word.
const (
	deathPageSize = 4096
	deathFirst    = 64 // the first entry's offset
	deathEntry    = 16
	deathSlots    = (deathPageSize - deathFirst) / deathEntry
	deathWordAt   = 8 // a word's offset in its entry: the head's futex_offset

	futexWait      = 0
	futexWaiters   = 0x80000000
	futexOwnerDied = 0x40000000
	futexTIDMask   = 0x3fffffff
)

// deathPage is the owner's side: the page, and which of its words a supervisor watches.
type deathPage struct {
	file *os.File // the memfd, handed to each supervisor
	mem  []byte
	tid  uint32 // the holding thread
	mu   sync.Mutex
	used [deathSlots]bool
}

var (
	deathOnce sync.Once
	ownDeath  *deathPage // nil where the page could not be set up: supervisors then wait for EOF
)

// ownerDeathPage returns this process's page, set up at its first use.
func ownerDeathPage() *deathPage {
	deathOnce.Do(func() { ownDeath = newDeathPage() })
	return ownDeath
}

func newDeathPage() *deathPage {
	fd, err := unix.MemfdCreate("custody-owner-death", unix.MFD_CLOEXEC)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "custody-owner-death")
	if err := unix.Ftruncate(fd, deathPageSize); err != nil {
		f.Close()
		return nil
	}
	mem, err := unix.Mmap(fd, 0, deathPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil
	}
	p := &deathPage{file: f, mem: mem}
	held := make(chan bool)
	go p.hold(held)
	if !<-held {
		unix.Munmap(mem)
		f.Close()
		return nil
	}
	return p
}

// hold makes the calling goroutine's thread the holder of every word, and keeps it so for the
// life of the process. It reports on held whether the kernel took the list.
func (p *deathPage) hold(held chan<- bool) {
	// Never unlocked: a locked goroutine that blocks keeps its thread to itself, so no other
	// goroutine ever runs on it, and the runtime never ends it.
	runtime.LockOSThread()
	tid := uint32(unix.Gettid())
	head := unsafe.Pointer(&p.mem[0])
	*(*uintptr)(head) = uintptr(unsafe.Pointer(&p.mem[deathFirst]))
	*(*int64)(unsafe.Add(head, 8)) = deathWordAt
	*(*uintptr)(unsafe.Add(head, 16)) = 0
	for i := range deathSlots {
		e := unsafe.Pointer(&p.mem[deathFirst+i*deathEntry])
		next := uintptr(head) // the list is circular: the last entry leads back to the head
		if i+1 < deathSlots {
			next = uintptr(unsafe.Add(e, deathEntry))
		}
		*(*uintptr)(e) = next
		atomic.StoreUint32((*uint32)(unsafe.Add(e, deathWordAt)), tid)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SET_ROBUST_LIST, uintptr(head), 24, 0); errno != 0 {
		// No list: the words name a thread whose death marks nothing, which a supervisor
		// cannot tell from a live owner. They are cleared, and no supervisor is given one.
		for i := range deathSlots {
			atomic.StoreUint32(p.word(deathFirst+i*deathEntry+deathWordAt), 0)
		}
		held <- false
		return // the thread ends with its locked goroutine
	}
	p.tid = tid
	held <- true
	// Parked, not blocked in a system call: the runtime hands the goroutine's P on at once, and
	// the thread sleeps, locked to it, for good.
	select {}
}

func (p *deathPage) word(off int) *uint32 { return (*uint32)(unsafe.Pointer(&p.mem[off])) }

// take reserves a word for a supervisor and returns its offset in the page, or false when every
// word is in use (that supervisor then waits for EOF alone).
func (p *deathPage) take() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, used := range p.used {
		if !used {
			p.used[i] = true
			return deathFirst + i*deathEntry + deathWordAt, true
		}
	}
	return 0, false
}

// give returns the word at off once its supervisor has exited. The word is reset to the holder's
// id: that supervisor may have left its waiters bit set.
func (p *deathPage) give(off int) {
	atomic.StoreUint32(p.word(off), p.tid)
	p.mu.Lock()
	p.used[(off-deathFirst-deathWordAt)/deathEntry] = false
	p.mu.Unlock()
}

// giveDeathWord hands a supervisor about to be started a word of this process's page: the page
// as its next inherited descriptor, and $EnvDeath naming it and the word. It returns what returns
// the word once that supervisor has exited, or nil when none was given (no page, or every word in
// use): that supervisor learns of the death from its pipe alone.
func giveDeathWord(cmd *exec.Cmd) (give func()) {
	p := ownerDeathPage()
	if p == nil {
		return nil
	}
	off, ok := p.take()
	if !ok {
		return nil
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, p.file)
	cmd.Env = append(cmd.Env, EnvDeath+"="+strconv.Itoa(fd)+","+strconv.Itoa(off))
	return func() { p.give(off) }
}
