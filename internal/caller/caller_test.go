package caller_test

import (
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/custody-dev/custody/internal/caller"
	"github.com/custody-dev/custody/internal/testproc"
)

func TestMain(m *testing.M) {
	// wait lives until its stdin, its lifeline, reads EOF.
	testproc.Register("wait", func([]string) int {
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
	// parent says "held <pid>" for the parent it holds, and waits like wait.
	testproc.Register("parent", func([]string) int {
		p, err := caller.Parent()
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("held", p.PID())
		io.Copy(io.Discard, os.Stdin)
		return 0
	})
	testproc.Main(m)
}
