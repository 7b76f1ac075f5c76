package reaper_test

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/custody-dev/custody/internal/reaper"
)

// BenchmarkReapPass is one reaping pass, what each SIGCHLD costs, in a process with n children
// of its own alive and one exited child its waiter has not reaped yet (so the pass pins it and
// reads every pidfd's fdinfo).
func BenchmarkReapPass(b *testing.B) {
	r, err := reaper.Start()
	if err != nil {
		b.Skipf("cannot reap orphans: %v", err)
	}
	defer r.Close()
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("children=%d", n), func(b *testing.B) {
			var cmds []*exec.Cmd
			for range n {
				c := exec.Command("sleep", "600")
				if err := c.Start(); err != nil {
					b.Fatal(err)
				}
				cmds = append(cmds, c)
			}
			z := exec.Command("true")
			if err := z.Start(); err != nil {
				b.Fatal(err)
			}
			defer z.Wait()
			for _, c := range cmds {
				defer c.Wait()
				defer c.Process.Kill()
			}
			for b.Loop() {
				reaper.Reap(r)
			}
		})
	}
}
