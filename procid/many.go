package procid

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// Result is one [Read]: the incarnation, or why there is none.
type Result struct {
	Inc Incarnation
	Err error
	// byPidfs: read through a pidfd alone (see [ReadRecords]); Inc has the PID, the pidfs id and
	// the boot id, and nothing from /proc.
	byPidfs bool
}

// Reads holds one read per PID, so that many records naming one PID (a spawner and its
// children) cost one read.
type Reads map[int]Result

// how says how a PID is read.
type how uint8

const (
	howProc  how = iota // /proc (or the OS's equivalent) alone: Read
	howExact            // /proc and the pidfs id: ReadExact
	howPidfs            // the pidfs id and an exit poll, no /proc: every record naming it has an id

	// While [ReadRecords] gathers them: some record naming the PID has a pidfs id, some has none.
	wantID   how = 1 << 4
	wantProc how = 1 << 5
)

// ReadMany reads every PID in pids, spreading the reads over the available CPUs: a read is a
// few system calls with no shared state, so a large ledger's proofs cost the floor of one read
// loop divided by the cores. The result has one entry per distinct PID.
func ReadMany(pids []int) Reads {
	hows := make(map[int]how, len(pids))
	uniq := make([]int, 0, len(pids))
	for _, p := range pids {
		if _, ok := hows[p]; !ok {
			hows[p] = howProc
			uniq = append(uniq, p)
		}
	}
	return readAll(uniq, hows, make(Reads, len(uniq)))
}

// ReadRecords reads what proving recs takes, each PID once, spread over the CPUs like
// [ReadMany]. A PID that only records with a pidfs id under this boot name is read through a
// pidfd alone, with no /proc text (Linux 6.9+, where /proc hides no process from the caller);
// one that some such record names is read with its pidfs id ([ReadExact]); the others are read.
func ReadRecords(recs []Record) Reads {
	boot, _ := BootID()
	needs := make(map[int]how, len(recs))
	pids := make([]int, 0, len(recs))
	for _, r := range recs {
		n, seen := needs[r.PID]
		if !seen {
			pids = append(pids, r.PID)
		}
		if r.pidfs(boot) != 0 {
			n |= wantID
		} else {
			n |= wantProc
		}
		needs[r.PID] = n
	}
	resolve(needs, pidfsReads())
	return readAll(pids, needs, make(Reads, len(pids)))
}

// resolve turns what the records naming each PID need into the way to read it, in place: through
// a pidfd alone when every record has a pidfs id and fast says such reads may decide, with the id
// when some has one, and from /proc alone otherwise.
func resolve(needs map[int]how, fast bool) {
	for pid, n := range needs {
		switch {
		case n == wantID && fast:
			needs[pid] = howPidfs
		case n&wantID != 0:
			needs[pid] = howExact
		default:
			needs[pid] = howProc
		}
	}
}

// batchSize is how many PIDs a read through pidfds takes at once (see readPidfsBatch): one poll
// for all of them, and at most this many descriptors open per reading goroutine.
const batchSize = 64

// readAll reads each of pids, which are distinct, the way hows says, into out, and returns out.
func readAll(pids []int, hows map[int]how, out Reads) Reads {
	var byPidfd, other []int
	for _, p := range pids {
		if hows[p] == howPidfs {
			byPidfd = append(byPidfd, p)
		} else {
			other = append(other, p)
		}
	}
	// Jobs: the PIDs read through pidfds in batches first, then one job per other PID.
	uniq := append(byPidfd, other...)
	res := make([]Result, len(uniq))
	batches := (len(byPidfd) + batchSize - 1) / batchSize
	job := func(j int) {
		if j < batches {
			lo := j * batchSize
			hi := min(lo+batchSize, len(byPidfd))
			readPidfsBatch(uniq[lo:hi], res[lo:hi])
			return
		}
		i := len(byPidfd) + j - batches
		res[i] = readHow(uniq[i], hows[uniq[i]])
	}
	workers := min(runtime.GOMAXPROCS(0), len(uniq)/64+1) // a goroutine is not worth 64 reads
	spread(batches+len(other), workers, job)
	for i, p := range uniq {
		out[p] = res[i]
	}
	return out
}

// spread runs job(0) to job(n-1) on up to workers goroutines, the caller's among them, each
// taking the next job not taken: jobs of unequal cost keep every goroutine busy to the end.
func spread(n, workers int, job func(int)) {
	var next atomic.Int64
	run := func() {
		for j := int(next.Add(1) - 1); j < n; j = int(next.Add(1) - 1) {
			job(j)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
}

func readHow(pid int, h how) Result {
	var res Result
	switch h {
	case howPidfs:
		res.Inc, res.Err = readPidfs(pid)
		res.byPidfs = true
		if res.Err != nil && !errors.Is(res.Err, ErrGone) { // this way cannot tell: read /proc
			return readHow(pid, howExact)
		}
	case howExact:
		res.Inc, res.Err = ReadExact(pid)
	default:
		res.Inc, res.Err = Read(pid)
	}
	return res
}

// Get returns the read of pid, reading it now if it was not read before. A process found alive
// through a pidfd alone is read again from /proc (with its pidfs id), so that the result is
// complete.
func (r Reads) Get(pid int) Result {
	res, ok := r[pid]
	switch {
	case !ok:
		res = readHow(pid, howProc)
	case res.byPidfs && res.Err == nil:
		res = readHow(pid, howExact)
	default:
		return res
	}
	r[pid] = res
	return res
}

// Check is [Record.Check] through the reads: a record from another boot is dead without a read,
// and otherwise the record is judged against its PID's read.
func (r Reads) Check(rec Record, strict bool) (State, Proof) {
	if rec.PID <= 0 {
		return Dead, NoProof
	}
	if rec.BootID != nil {
		if boot, err := BootID(); err == nil && boot != *rec.BootID {
			return Dead, NoProof
		}
	}
	res, ok := r[rec.PID]
	switch {
	case !ok && rec.pidfs(bootOrNone()) != 0 && PidfsError() == nil:
		h := howExact
		if pidfsReads() {
			h = howPidfs
		}
		res = readHow(rec.PID, h)
		r[rec.PID] = res
	case !ok:
		res = r.Get(rec.PID)
	case res.Err != nil:
	case res.byPidfs && rec.pidfs(res.Inc.BootID) == 0:
		res = r.Get(rec.PID) // the record needs /proc's fields
	case res.Inc.PidfdID == 0 && rec.pidfs(res.Inc.BootID) != 0 && PidfsError() == nil:
		res = readHow(rec.PID, howExact) // read without the id the record can be proven by
		r[rec.PID] = res
	}
	return rec.Judge(res.Inc, res.Err, strict)
}

func bootOrNone() string {
	boot, _ := BootID()
	return boot
}
