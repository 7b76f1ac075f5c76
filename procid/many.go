package procid

import (
	"runtime"
	"sync"
)

// Result is one [Read]: the incarnation, or why there is none.
type Result struct {
	Inc Incarnation
	Err error
}

// Reads holds one [Read] per PID, so that many records naming one PID (a spawner and its
// children) cost one read.
type Reads map[int]Result

// ReadMany reads every PID in pids, spreading the reads over the available CPUs: a read is a
// few system calls with no shared state, so a large ledger's proofs cost the floor of one read
// loop divided by the cores. The result has one entry per distinct PID.
func ReadMany(pids []int) Reads {
	out := make(Reads, len(pids))
	uniq := make([]int, 0, len(pids))
	for _, p := range pids {
		if _, ok := out[p]; !ok {
			out[p] = Result{}
			uniq = append(uniq, p)
		}
	}
	res := make([]Result, len(uniq))
	workers := min(runtime.GOMAXPROCS(0), len(uniq)/64+1) // a goroutine is not worth 64 reads
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(uniq); i += workers {
				res[i].Inc, res[i].Err = Read(uniq[i])
			}
		})
	}
	wg.Wait()
	for i, p := range uniq {
		out[p] = res[i]
	}
	return out
}

// Get returns the read of pid, reading it now if it was not read before.
func (r Reads) Get(pid int) Result {
	res, ok := r[pid]
	if !ok {
		res.Inc, res.Err = Read(pid)
		r[pid] = res
	}
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
	res := r.Get(rec.PID)
	return rec.Judge(res.Inc, res.Err, strict)
}
