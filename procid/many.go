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

// ReadMany reads every PID in pids, spreading the reads over the available CPUs: a read is a
// few system calls with no shared state, so a large ledger's proofs cost the floor of one read
// loop divided by the cores. The result has one entry per distinct PID.
func ReadMany(pids []int) map[int]Result {
	out := make(map[int]Result, len(pids))
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
