// Package ledger is custody's machine-wide, per-user roster of registered processes: a JSON array
// in one file that many programs (custody, and Hermes, whose spawn-ledger.json it shares) read
// and write at once.
//
// # Guarantees
//
// The ledger never loses, fakes or silently empties a row:
//
//   - Every write goes through one path, [Ledger.Update]: under an exclusive flock(2) on the
//     sidecar <ledger>.lock it reads the file, prunes, applies the change, writes a temporary file
//     in the same directory and renames it over the ledger. A crash of any process at any instant
//     leaves either the old or the new file, and readers need no lock.
//   - The lock wait is bounded ([DefaultLockTimeout], or [Ledger.LockTimeout]). A holder that
//     stalls (stopped with SIGSTOP, hung on a dead NFS server) makes the writer give up with a
//     [*LockedError] naming the holder; it never writes without the lock, since that could lose
//     the holder's rows when it resumes. The bound is on another process's hold: the writes of
//     one [Ledger] handle queue for the lock in process, in order, without a bound but their
//     context's, so that a burst of them never fails against itself.
//   - A file that is not a JSON array is never read as an empty roster: it is renamed aside to
//     <ledger>.corrupt (then .corrupt.2, .corrupt.3, …, never overwriting an earlier one) with its
//     bytes intact, the rename is reported, and only then does the write start from an empty list.
//   - Reading is as lenient as the Hermes reader, so that the two programs never disagree on
//     whether the shared file is corrupt (and never quarantine each other's live rows): a 0-byte
//     or all-white-space file is an empty roster, a UTF-8 byte order mark is skipped, and the
//     NaN, Infinity and -Infinity that Python's json.dumps writes are accepted as values and kept
//     byte for byte. A row whose identity fields (pid, create_time, boot_start, start_ticks) are
//     not numbers names no process: it is malformed.
//   - Another program may write without the lock (Hermes does, after waiting 2 s for it). Just
//     before its rename, a writer checks that the ledger is still the file it read (inode, size
//     and modification time); if not, it reads the file in place again and applies its change to
//     those rows ([Report.Merged] counts it), so a stalled custody writer never renames a stale
//     read-modify-write over the other program's row. The check and the rename are two system
//     calls: a writer without the lock that renames between them still wins, in a window of
//     microseconds where it was the whole time the lock was held.
//   - A row for a PID already recorded replaces it; when both name the same incarnation exactly
//     (start ticks, or boot-relative start within one boot), the fields the new row lacks
//     (absent or null) are kept from the old one, so a program re-registering a child custody
//     started keeps custody's pgid, scope, owner, reapable and containment.
//   - Rows are kept byte for byte unless custody changes them, so fields written by other programs
//     survive every rewrite; rows that lack custody's own fields read with those fields nil.
//   - A row is pruned only on proof: it is malformed (not an object, no positive integer pid, or
//     an identity field that is not a number),
//     its process is provably dead, or it has the PID of the row being written. Unknown stays.
//
// # Trust
//
// A row is a claim that licenses signals, so every entry point ([Ledger.Rows], [Ledger.Update] and
// every write, [Peek]) first checks that nobody but the caller and root can write the
// ledger, its lock or its directory, and that neither file is a symbolic link or anything but a
// regular file; both are opened without following links and without blocking, and checked again
// through the descriptor. A refusal is a [*TrustError]. A file above [MaxSize] is refused with
// [ErrTooLarge] before it is read. See [Ledger.Trust].
//
// # Durability
//
// Writes are not fsync'ed. A crash of a process cannot lose a rename that returned; only a power
// loss or kernel crash can, and that ends every process a row can name: rows of an earlier boot are
// dead by rule. If such a loss leaves a truncated file, it is quarantined and reported like any
// corrupt file; an empty one is an empty roster, as Hermes reads it, which after a power loss is
// what the rows of the earlier boot amount to. Skipping fsync keeps an append near a
// millisecond, where an fsync on a virtual disk costs several.
//
// # Pruning cost
//
// Reading /proc/PID/stat costs about 11 µs and a signal-0 probe about 2 µs on a virtual machine,
// so a write cannot check 1,000 rows. Each write compares every row's boot id (free), probes a
// window of 32 rows from a random offset for a process with their PID, and re-proves the exact
// identity of the first 4 of them, dropping the rows proven dead. A dead row goes within
// len(rows)/32 writes. The windows are small because an owner's write
// runs while its child execs, and on a machine with few CPUs each probe slows that exec. Every act of authority re-proves identity itself; pruning only
// keeps the file small.
//
// # Caveats
//
// flock(2) locks are advisory and, on NFS, only as good as the server's lock manager: keep the
// ledger on a local disk (the default state directory is). A lock dies with its holder, so a
// crashed writer never leaves the ledger locked.
package ledger
