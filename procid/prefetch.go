package procid

import "sync"

// Prefetch gathers records to prove as the caller produces them (a ledger read parsing its
// rows), and reads their PIDs through pidfds on another goroutine meanwhile, so that on a
// machine with a CPU to spare the proofs cost no time of their own. [Prefetch.Add] takes each
// record as it comes; [Prefetch.Reads] returns the reads proving all of them, as [ReadRecords]
// does for the same records. A PID is read ahead when the first record naming it can be proven
// by its pidfs id alone, and the read is kept only when every record naming it can be (otherwise
// the PID is read again, from /proc, as ReadRecords reads it): a read ahead is a read like any
// other, made a little earlier.
//
// A Prefetch belongs to one goroutine. Without pidfs reads (see [ReadRecords]) nothing is read
// ahead.
type Prefetch struct {
	fast    bool // pidfs reads
	boot    string
	needs   map[int]how // what the records naming each PID need, as in ReadRecords
	order   []int       // the PIDs in the order first named
	recent  [2]added    // the last two records added (a row, its spawner), not added again
	pending []int
	batches []*batch
	work    chan *batch // to the reading goroutine, started with the first batch
	wg      sync.WaitGroup
}

// added is a PID added and what the record naming it needed.
type added struct {
	pid  int
	want how
}

// batch is PIDs read ahead together and their reads.
type batch struct {
	pids []int
	res  []Result
}

// NewPrefetch returns a Prefetch with no records.
func NewPrefetch() *Prefetch {
	boot, _ := BootID()
	return &Prefetch{fast: pidfsReads(), boot: boot, needs: map[int]how{}}
}

// Add adds rec to the records to prove, and reads its PID ahead when rec is the first record
// naming it and can be proven by its pidfs id.
func (p *Prefetch) Add(rec Record) {
	want := wantProc
	if rec.pidfs(p.boot) != 0 {
		want = wantID
	}
	added := added{rec.PID, want}
	if p.recent[0] == added || p.recent[1] == added { // a spawner named row after row
		return
	}
	p.recent[0], p.recent[1] = added, p.recent[0]
	n, seen := p.needs[rec.PID]
	if !seen {
		p.order = append(p.order, rec.PID)
	}
	p.needs[rec.PID] = n | want
	if !seen && want == wantID && p.fast && rec.PID > 0 {
		if p.pending = append(p.pending, rec.PID); len(p.pending) == batchSize {
			p.send()
		}
	}
}

// send hands the pending PIDs to the reading goroutine, or leaves them to Reads when it is that
// far behind: Add never waits.
func (p *Prefetch) send() {
	b := &batch{pids: p.pending}
	p.pending = nil
	p.batches = append(p.batches, b)
	if p.work == nil {
		p.work = make(chan *batch, 64)
		p.wg.Go(func() { p.read() })
	}
	select {
	case p.work <- b:
	default: // Reads reads it
	}
}

func (p *Prefetch) read() {
	for b := range p.work {
		b.res = make([]Result, len(b.pids))
		readPidfsBatch(b.pids, b.res)
	}
}

// Reads ends the reads ahead, with the caller's goroutine taking those not started, and returns
// the reads proving the records added. Call it once, also when the records are not wanted after
// all (a corrupt ledger): it ends the reading goroutine.
func (p *Prefetch) Reads() Reads {
	if len(p.pending) > 0 { // the last few: read below, here
		p.batches = append(p.batches, &batch{pids: p.pending})
		p.pending = nil
	}
	if p.work != nil {
		close(p.work)
		p.read()
		p.wg.Wait()
	}
	out := make(Reads, len(p.needs))
	for _, b := range p.batches {
		if b.res == nil {
			b.res = make([]Result, len(b.pids))
			readPidfsBatch(b.pids, b.res)
		}
		for i, pid := range b.pids {
			out[pid] = b.res[i]
		}
	}
	resolve(p.needs, p.fast)
	todo := p.order[:0:0]
	for _, pid := range p.order {
		if _, ok := out[pid]; !ok || p.needs[pid] != howPidfs {
			todo = append(todo, pid)
		}
	}
	return readAll(todo, p.needs, out)
}
