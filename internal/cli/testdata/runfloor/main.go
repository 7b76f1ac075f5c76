// Command runfloor is the floor of `custody run -- CMD`: what any program that covers its child
// with a supervisor process, as custody's design has it (one supervisor per owner, started before
// the child), cannot do without, and nothing else. It starts a second process of the binary
// named first, as custody run starts its supervisor (here that binary's --version: its runtime's
// start and exit), then the child, waits for the child, and then for the second process, which
// custody run too reaps before it exits. No ledger, no cgroup, no cover line.
//
//	runfloor BIN CMD [ARGS]
package main

import (
	"os"
	"os/exec"
)

func main() {
	if len(os.Args) < 3 {
		os.Stderr.WriteString("usage: runfloor BIN CMD [ARGS]\n")
		os.Exit(2)
	}
	second := exec.Command(os.Args[1], "--version")
	if err := second.Start(); err != nil {
		os.Exit(1)
	}
	child := exec.Command(os.Args[2], os.Args[3:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := child.Run()
	second.Wait()
	if err != nil {
		os.Exit(1)
	}
}
