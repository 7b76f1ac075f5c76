package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/custody-dev/custody/procid"
)

// How many rows each write checks (see the package doc): existWindow with the signal-0 probe
// (about 2 µs each), proveWindow of those by exact identity (a /proc read, about 11 µs).
const (
	existWindow = 32
	proveWindow = 4
)

// ErrNotRegistered reports that a process has no row in the ledger.
var ErrNotRegistered = errors.New("ledger: process not registered")

// Ledger is a handle on one ledger file, safe for use by concurrent goroutines and processes.
// Between writes it keeps the file it last wrote open (not on Windows), with the rows written, so
// that its next write skips reading and parsing the file when nobody has replaced it since (see
// snapshot). A handle that has written therefore holds one descriptor and the ledger's bytes
// until [Ledger.Close], and an owner's handle (one that prepared a start, [Txn.PrepareAppend])
// on Linux one more, its spare file for the next write (see newTemp); one that is dropped
// instead has its descriptors closed by the garbage collector, as any unreachable [os.File].
type Ledger struct {
	path string
	// LockTimeout bounds the wait for the lock; 0 means [DefaultLockTimeout].
	LockTimeout time.Duration
	// OnCorrupt, when set, is told of every corrupt file the moment it is quarantined.
	OnCorrupt func(*CorruptError)

	mu        sync.Mutex
	last      *snapshot
	spare     *os.File // see newTemp
	spareSize int64    // the size reserved on disk for the spare
	spareLen  int64    // the bytes written in the spare (see fillSpare); 0 when empty
	// filled is the snapshot whose kept rows the spare holds (see fillSpare), with those rows
	// and the number of rows pruned from it; nil when the spare holds none, or another's.
	filled       *snapshot
	filledRows   []Row
	filledPruned int
	starts       bool // the handle prepared an owner's start (Txn.PrepareAppend): it keeps a spare
	making       bool // a spare is being made
	noSpare      bool // the directory cannot have one

	dropping  []Row          // rows to drop with the handle's next write (see DropSoon)
	dropTimer *time.Timer    // writes them when no write came within DropDelay
	refills   sync.WaitGroup // DropSoon's fills of the spare without the rows it drops

	tail   chan struct{} // closed when the last append's background has ended (see background)
	held   *heldLock     // the lock file kept open between transactions, when no transaction has it
	closed bool          // Close was called: DropSoon writes at once from then on (see DropSoon)
	turn   chan struct{} // holds a token while one of the handle's transactions runs (see takeTurn)
}

// Open returns a handle on the ledger at path (see [Resolve]). It touches nothing on disk.
func Open(path string) *Ledger { return &Ledger{path: path} }

// Close writes the drops [Ledger.DropSoon] left pending, then lets go of what the handle keeps
// from its last write. The handle stays usable: its next write reads the file again.
func (l *Ledger) Close() error {
	var err error
	if l.pendingDrops() > 0 { // not Flush's wait for the turn: a caller may close with a Txn open
		err = l.Flush(context.Background()) // bounded by the LockTimeout
	}
	l.awaitTail()
	l.refills.Wait()
	if s := l.takeSnapshot(); s != nil {
		s.release()
	}
	l.closeSpare()
	l.mu.Lock()
	h := l.held
	l.held = nil
	l.closed = true
	l.mu.Unlock()
	h.close()
	return err
}

// Path returns the ledger file's path.
func (l *Ledger) Path() string { return l.path }

// Report says what one write did besides the change it was asked for.
type Report struct {
	Pruned      int           // rows dropped as provably dead or replaced by the written PID
	Malformed   int           // elements dropped because they were not rows
	Quarantined *CorruptError // the corrupt file moved aside before this write, if any
	// Merged counts the times the write found the ledger replaced by a writer that does not take
	// the lock, and applied its change again to the rows of the file in place.
	Merged int
}

// Update is the single write path: under the lock it reads the rows, prunes them (replaced names
// PIDs the change is about to write, whose old rows go), passes the rest to fn and atomically
// replaces the file with what fn returns. fn must not block. It is begin followed by
// commit.
//
// The rows fn receives have their identity fields decoded (pid, create_time, boot_id,
// boot_start, start_ticks, registered_at: what pruning and [Row.Same] use); the others read as
// absent, and every row keeps all its bytes. [Row.Decoded] returns a row with every field.
func (l *Ledger) Update(ctx context.Context, replaced []int, fn func(rows []Row) ([]Row, error)) (Report, error) {
	tx, err := l.begin(ctx, true)
	if err != nil {
		return Report{}, err
	}
	defer l.afterWrite() // unlocked by then
	return tx.commit(replaced, fn)
}

// readLocked reads the file under the lock into buf (see readBufs), quarantining it if corrupt.
// The rows alias the bytes it returns.
//
// It also returns the file, still open where the OS allows, for the write to release once it has
// replaced it (see releaseReplaced).
func (l *Ledger) readLocked(rep *Report, buf []byte) (parsed, []byte, *os.File, error) {
	p, data, held, err := readHeld(l.path, decodeIdentity, buf, true, nil)
	if data != nil {
		buf = data
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		closeHeld(held)
		if ce.MovedTo, err = quarantine(l.path); err != nil {
			return parsed{}, buf, nil, err
		}
		rep.Quarantined = ce
		if l.OnCorrupt != nil {
			l.OnCorrupt(ce)
		}
		return parsed{}, buf, nil, nil
	}
	if err != nil {
		closeHeld(held)
		return p, buf, nil, err
	}
	return p, buf, held, nil
}

// Add records row, replacing any row with the same PID.
func (l *Ledger) Add(ctx context.Context, row Row) (Report, error) {
	if row.PID <= 0 {
		return Report{}, fmt.Errorf("ledger: add pid %d: not a positive pid", row.PID)
	}
	tx, err := l.begin(ctx, true)
	if err != nil {
		return Report{}, fmt.Errorf("ledger: add pid %d: %w", row.PID, err)
	}
	rep, err := tx.Append(row)
	if err != nil {
		return rep, fmt.Errorf("ledger: add pid %d: %w", row.PID, err)
	}
	return rep, nil
}

// Rows reads every row without the lock: the atomic rename makes every read see a whole file. A
// corrupt file is an error, a *CorruptError (its MovedTo empty), so a roster is never silently
// empty; and a read changes nothing: the file stays where it is, for the next write to quarantine
// (see [Report.Quarantined]). A listing must not move aside a file that another program, reading
// it otherwise, might still be writing.
func (l *Ledger) Rows(ctx context.Context) ([]Row, error) { return l.rows(ctx, decodeFull, nil) }

// rows is Rows, decoding the fields d names, and calling each, unless nil, with every row as
// soon as it is decoded (also rows of a read that then turns out corrupt).
func (l *Ledger) rows(ctx context.Context, d decoding, each func(*Row)) ([]Row, error) {
	if err := checkTrust(l.path); err != nil {
		return nil, err
	}
	p, err := l.read(ctx, d, each)
	if ce, ok := errors.AsType[*CorruptError](err); ok {
		return nil, ce
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return p.rows, nil
}

// read reads the file as a reader: without the lock, or under the shared lock where the OS needs
// it (see readersLock).
func (l *Ledger) read(ctx context.Context, d decoding, each func(*Row)) (parsed, error) {
	if readersLock {
		if _, err := os.Stat(l.path + ".lock"); err == nil {
			unlock, err := lockAs(ctx, l.path+".lock", cmp.Or(l.LockTimeout, DefaultLockTimeout), true)
			if err != nil {
				return parsed{}, err
			}
			defer unlock()
		}
	}
	p, _, err := readFile(l.path, d, nil, each)
	return p, err
}

// prune drops rows whose process is provably dead. Every row's boot id is compared; with probe, a
// window of existWindow rows from a random offset gets the signal-0 probe, and the first
// proveWindow of those the exact proof. A dead row is found within a few writes, and no write
// pays for all.
func prune(rows []Row, rep *Report, probe bool) []Row {
	boot, bootErr := procid.BootID()
	window := 0
	if probe {
		window = existWindow
	}
	start := 0
	if len(rows) > window {
		start = rand.IntN(len(rows))
	}
	kept := rows[:0]
	for i, r := range rows {
		pos := (i - start + len(rows)) % len(rows)
		if dead(r, boot, bootErr, pos < window, pos < min(window, proveWindow)) {
			rep.Pruned++
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

func dead(r Row, boot string, bootErr error, probe, prove bool) bool {
	if r.BootID != nil && bootErr == nil && *r.BootID != boot {
		return true
	}
	if !probe {
		return false
	}
	if !procid.Exists(r.PID) {
		return true
	}
	if !prove {
		return false
	}
	state, _ := r.Record().Check(false)
	return state == procid.Dead
}

// Peek reads the rows at path without the lock and without quarantining a corrupt file: for
// reports that must change nothing. It refuses an untrusted ledger as [Ledger.Rows] does.
func Peek(path string) ([]Row, error) {
	if err := checkTrust(path); err != nil {
		return nil, err
	}
	p, _, err := readFile(path, decodeFull, nil, nil)
	return p.rows, err
}

// CheckLock returns nil when a writer could take the ledger's lock within wait (also when no
// lock file exists yet), and otherwise why not: a [*LockedError] naming the holder when one keeps
// it (see [IsLocked]). It takes and at once releases the lock; it creates and writes nothing.
func (l *Ledger) CheckLock(ctx context.Context, wait time.Duration) error {
	if _, err := os.Lstat(l.path + ".lock"); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := lock(ctx, l.path+".lock", wait)
	if err != nil {
		return err
	}
	unlock()
	return nil
}

// Same reports whether two rows record the same registration: the same PID, start, pidfs id and
// registration time. A row rewritten for a new process that reused the PID is not the same.
func (r Row) Same(o Row) bool {
	return r.PID == o.PID && r.RegisteredAt == o.RegisteredAt && eqPtr(r.StartTicks, o.StartTicks) &&
		eqPtr(r.CreateTime, o.CreateTime) && eqPtr(r.PidfdID, o.PidfdID)
}

func eqPtr[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }

// Drop removes the given rows (see [Row.Same]), for callers that proved their processes gone.
func (l *Ledger) Drop(ctx context.Context, drop []Row) error {
	if len(drop) == 0 {
		return nil
	}
	_, err := l.Update(ctx, nil, func(rows []Row) ([]Row, error) {
		return slices.DeleteFunc(rows, func(r Row) bool {
			return slices.ContainsFunc(drop, r.Same)
		}), nil
	})
	if err != nil {
		return fmt.Errorf("ledger: drop rows: %w", err)
	}
	return nil
}
