package agent_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/supervise"
)

// BenchmarkStart times one start, from the request sent to the PID received, through the agent
// and in process through Owner.Start, alternately in one loop, so that the load of the machine
// weighs on both alike: the agent's cost is the ratio it reports. Each child is /bin/true, waited
// for outside the timed part.
func BenchmarkStart(b *testing.B) {
	c := startAgent(b)
	o := &custody.Owner{Ledger: ledger.Open(ledgerPath(b)), Supervisor: &supervise.Client{}}
	defer o.Supervisor.Close()
	defer o.Close()
	var viaAgent, inProcess time.Duration
	for b.Loop() {
		t0 := time.Now()
		r := c.do(map[string]any{"op": "start", "argv": []string{"/bin/true"}, "stdio": []string{"null", "null", "null"}})
		viaAgent += time.Since(t0)
		if !r.ok() {
			b.Fatalf("start: %s", r.raw)
		}
		c.event("exit")
		t0 = time.Now()
		child, err := o.Start(context.Background(), exec.Command("/bin/true"), custody.StartOptions{})
		inProcess += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		child.Wait()
	}
	b.ReportMetric(float64(viaAgent.Nanoseconds())/float64(b.N), "agent-ns/start")
	b.ReportMetric(float64(inProcess.Nanoseconds())/float64(b.N), "owner-ns/start")
	b.ReportMetric(float64(viaAgent)/float64(inProcess), "agent/owner")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAgentMemory reports the agent's resident memory (VmRSS) holding 20 children.
func BenchmarkAgentMemory(b *testing.B) {
	for b.Loop() {
		c := startAgent(b)
		for range 20 {
			if r := c.do(helperStart(b, "hold", "")); !r.ok() {
				b.Fatalf("start: %s", r.raw)
			}
		}
		b.ReportMetric(float64(rssKiB(b, c.agent.Process.Pid)), "agent-KiB-rss")
		c.hangup()
	}
}

func rssKiB(b *testing.B, pid int) int {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.Lines(string(st)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
