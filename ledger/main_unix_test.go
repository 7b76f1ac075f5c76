//go:build unix

package ledger_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/custody-dev/custody/internal/testproc"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

func TestMain(m *testing.M) {
	testproc.Register("register-many", helperRegisterMany)
	testproc.Register("write-loop", helperWriteLoop)
	testproc.Register("read-loop", helperReadLoop)
	testproc.Register("hold-lock", helperHoldLock)
	testproc.Main(m)
}

// helperRegisterMany starts N `cat` children (their stdin a pipe from this helper: they die with
// it), registers each in the ledger, prints "pid <pid>" for each and "done", then holds them until
// its own stdin closes.
func helperRegisterMany(args []string) int {
	path, n := args[0], atoi(args[1])
	l := ledger.Open(path)
	l.LockTimeout = time.Minute // eight writers each waiting behind the other seven
	var kids []*exec.Cmd
	for range n {
		c := exec.Command("cat")
		if _, err := c.StdinPipe(); err != nil {
			return fail(err)
		}
		if err := c.Start(); err != nil {
			return fail(err)
		}
		kids = append(kids, c)
		if err := register(l, c.Process.Pid, "serve"); err != nil {
			return fail(err)
		}
		fmt.Printf("pid %d\n", c.Process.Pid)
	}
	fmt.Println("done")
	waitStdin()
	for _, c := range kids {
		c.Process.Kill()
		c.Wait()
	}
	return 0
}

// helperWriteLoop registers the given PIDs round robin, forever, printing "ok <pid> <seq>" after
// each write has returned; the test SIGKILLs it at some point.
func helperWriteLoop(args []string) int {
	l := ledger.Open(args[0])
	pids := args[1:]
	for seq := 1; ; seq++ {
		pid := atoi(pids[seq%len(pids)])
		inc, err := procid.Read(pid)
		if err != nil {
			return fail(err)
		}
		row := ledger.NewRow(inc, procid.Incarnation{})
		row.Purpose = "serve"
		row.RegisteredAt = float64(seq)
		if _, err := l.Add(context.Background(), row); err != nil {
			return fail(err)
		}
		fmt.Printf("ok %d %d\n", pid, seq)
	}
}

// helperReadLoop parses the ledger file again and again until stdin closes, then prints
// "reads <n> failures <m> <first failure>".
func helperReadLoop(args []string) int {
	stop := make(chan struct{})
	go func() { waitStdin(); close(stop) }()
	reads, failures, first := 0, 0, ""
	for {
		select {
		case <-stop:
			fmt.Printf("reads %d failures %d %s\n", reads, failures, first)
			return 0
		default:
		}
		if _, err := ledger.Peek(args[0]); err != nil {
			if failures == 0 {
				first = err.Error()
			}
			failures++
		}
		reads++
		time.Sleep(time.Millisecond) // leave the CPU to the writers; this is a sampling pace
	}
}

// helperHoldLock takes the ledger's lock the way any writer does and holds it until stdin closes.
func helperHoldLock(args []string) int {
	l := ledger.Open(args[0])
	_, err := l.Update(context.Background(), nil, func(rows []ledger.Row) ([]ledger.Row, error) {
		fmt.Println("locked")
		waitStdin()
		return rows, nil
	})
	if err != nil {
		return fail(err)
	}
	return 0
}

// rowFor is this process's row for pid, a live process the test started.
func rowFor(t *testing.T, pid int) ledger.Row {
	t.Helper()
	inc, err := procid.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := procid.Self()
	return ledger.NewRow(inc, self)
}

func register(l *ledger.Ledger, pid int, purpose string) error {
	inc, err := procid.Read(pid)
	if err != nil {
		return err
	}
	self, _ := procid.Self()
	row := ledger.NewRow(inc, self)
	row.Purpose = purpose
	_, err = l.Add(context.Background(), row)
	return err
}

func waitStdin() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "helper:", err)
	fmt.Println("error", err)
	return 1
}
