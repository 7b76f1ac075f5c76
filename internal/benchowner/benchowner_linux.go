package benchowner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/supervise"
)

// Tree is each scope's program: a shell that starts a cat (the grandchild) and becomes a cat
// itself, both reading the lifeline, after printing "<grandchild> <child>". Each exits on
// SIGTERM. (A background command's stdin is /dev/null in a shell without job control, before its
// own redirections: the lifeline goes through fd 3.)
const Tree = `exec 3<&0; cat <&3 3<&- & echo $! $$; exec cat 3<&-`

// Main owns args[0] scopes, each a Tree (its ledger at args[1]), holds a ballast of args[2] MiB
// when given (see Ballast), prints "ready" and waits to be killed. Its stdin is the trees'
// lifeline, and its fd 3 the write end of a pipe that only it holds: the benchmark sees its end
// when the kernel closes the dying owner's files, as its supervisor sees the end of its own pipe.
func Main(args []string) int {
	syscall.CloseOnExec(3)
	n, _ := strconv.Atoi(args[0])
	Ballast(args[2:])
	o := &custody.Owner{Ledger: ledger.Open(args[1]), Supervisor: &supervise.Client{Grace: 3 * time.Second}}
	for range n {
		cmd := exec.Command("sh", "-c", Tree)
		cmd.Stdin, cmd.Stdout = os.Stdin, os.Stdout
		if _, err := o.Start(context.Background(), cmd, custody.StartOptions{Purpose: "serve"}); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	fmt.Println("ready")
	select {}
}

// Ballast gives the process args[0] MiB of memory it has touched (none without args), as a real
// owner has: a program's death takes longer the more memory the kernel has to tear down before
// it closes the program's files.
func Ballast(args []string) {
	if len(args) == 0 {
		return
	}
	mib, _ := strconv.Atoi(args[0])
	if mib > 0 {
		// Populated at once: touching each page would cost a fault each, seconds per owner.
		unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	}
}
