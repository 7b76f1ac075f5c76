package ledger

import (
	"context"

	"github.com/custody-dev/custody/procid"
)

// Entry is a row with its liveness judged at the time of the query.
type Entry struct {
	*Row
	State        procid.State
	Proof        procid.Proof
	SpawnerState string // alive, dead, unknown, or unrecorded
}

// Query selects rows.
type Query struct {
	// Install keeps only rows of this install; empty keeps every install.
	Install string
	// Verified keeps only rows whose identity is proven now (exact start, or epoch start within
	// two seconds of a recorded create time). Otherwise every row not provably dead is kept.
	Verified bool
	// Remains, when set and Verified is not, keeps a row whose process is provably dead when it
	// reports true: its scope still holds processes (see stop.Remains). Such an entry's State is
	// procid.Dead. Only the fields judging reads are decoded in the row it is given by
	// [Ledger.Query] (see [Row.Decoded]).
	Remains func(*Row) bool
}

// Query reads the rows and judges each one's liveness and its spawner's. Each PID is read once
// per query, however many rows name it (a spawner usually has many children), and the reads are
// spread over the CPUs. Rows with a pidfs id are proven through a pidfd alone where the kernel
// allows (see [procid.ReadRecords]): no /proc text, and those proofs are made on another
// goroutine while the file is still being parsed ([procid.Prefetch]).
//
// The entries' rows have only the fields judging reads decoded: the identity of the process and
// of its spawner ([Row.Record], [Row.SpawnerRecord]) and the install; the others read as absent.
// Each row keeps all its bytes ([Row.Raw]), and [Row.Decoded] returns it with every field. A
// corrupt ledger is handled as by [Ledger.Rows].
func (l *Ledger) Query(ctx context.Context, q Query) ([]Entry, error) {
	ahead := procid.NewPrefetch()
	rows, err := l.rows(ctx, decodeJudge, func(r *Row) {
		if q.selects(r) {
			ahead.Add(r.Record())
			if r.SpawnerPID != nil {
				ahead.Add(r.SpawnerRecord())
			}
		}
	})
	reads := ahead.Reads() // also on an error: it ends the reads ahead
	if err != nil {
		return nil, err
	}
	return judge(rows, q, reads), nil
}

// Judge applies q to rows already read.
func Judge(rows []Row, q Query) []Entry {
	recs := make([]procid.Record, 0, 2*len(rows))
	for i := range rows {
		if r := &rows[i]; q.selects(r) {
			recs = append(recs, r.Record())
			if r.SpawnerPID != nil {
				recs = append(recs, r.SpawnerRecord())
			}
		}
	}
	return judge(rows, q, procid.ReadRecords(recs))
}

// selects reports whether the query keeps the row, before judging it.
func (q Query) selects(r *Row) bool { return q.Install == "" || r.Install == q.Install }

// judge is Judge with the records' PIDs read.
func judge(rows []Row, q Query, reads procid.Reads) []Entry {
	out := make([]Entry, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		if !q.selects(r) {
			continue
		}
		e := Entry{Row: r}
		e.State, e.Proof = reads.Check(r.Record(), q.Verified)
		if q.Verified && e.Proof == procid.NoProof {
			continue
		}
		if e.State == procid.Dead && (q.Verified || q.Remains == nil || !q.Remains(r)) {
			continue
		}
		e.SpawnerState = spawnerState(reads, r)
		out = append(out, e)
	}
	return out
}

// spawnerState judges the row's spawner leniently: a spawner recorded without any start is alive
// while its PID lives, since this state is shown, never acted on.
func spawnerState(reads procid.Reads, r *Row) string {
	rec := r.SpawnerRecord()
	if rec.PID == 0 {
		return "unrecorded"
	}
	s, _ := reads.Check(rec, false)
	return s.String()
}
