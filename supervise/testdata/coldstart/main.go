// Command coldstart is the smallest Go program that owns children with custody. It measures its
// supervisor's cold start as its owner sees it: -n times, from before supervise.Client.Start to
// its return (on the process-group path the supervisor, this binary re-executed, has signalled
// readiness; on the cgroup path it has been started, its readiness awaited beside), and prints
// the durations in nanoseconds, one a line. BenchmarkSupervisorStart builds and runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/supervise"
)

func main() {
	custody.Init()
	n := flag.Int("n", 20, "how many cold starts")
	flag.Parse()
	for range *n {
		c := &supervise.Client{}
		start := time.Now()
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "coldstart:", err)
			os.Exit(1)
		}
		d := time.Since(start)
		c.Close()
		fmt.Println(d.Nanoseconds())
	}
}
