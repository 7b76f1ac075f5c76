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
}

// Query reads the rows and judges each one's liveness and its spawner's. Each PID is read once
// per query, however many rows name it (a spawner usually has many children), and the reads are
// spread over the CPUs. Rows with a pidfs id are proven through a pidfd alone where the kernel
// allows (see [procid.ReadRecords]): no /proc text.
func (l *Ledger) Query(ctx context.Context, q Query) ([]Entry, error) {
	rows, err := l.Rows(ctx)
	if err != nil {
		return nil, err
	}
	return Judge(rows, q), nil
}

// Judge applies q to rows already read.
func Judge(rows []Row, q Query) []Entry {
	recs := make([]procid.Record, 0, 2*len(rows))
	for _, r := range rows {
		if q.Install == "" || r.Install == q.Install {
			recs = append(recs, r.Record())
			if r.SpawnerPID != nil {
				recs = append(recs, r.SpawnerRecord())
			}
		}
	}
	reads := procid.ReadRecords(recs)
	out := make([]Entry, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		if q.Install != "" && r.Install != q.Install {
			continue
		}
		e := Entry{Row: r}
		e.State, e.Proof = reads.Check(r.Record(), q.Verified)
		if e.State == procid.Dead || (q.Verified && e.Proof == procid.NoProof) {
			continue
		}
		e.SpawnerState = spawnerState(reads, *r)
		out = append(out, e)
	}
	return out
}

// spawnerState judges the row's spawner leniently: a spawner recorded without any start is alive
// while its PID lives, since this state is shown, never acted on.
func spawnerState(reads procid.Reads, r Row) string {
	rec := r.SpawnerRecord()
	if rec.PID == 0 {
		return "unrecorded"
	}
	s, _ := reads.Check(rec, false)
	return s.String()
}
