//go:build linux || darwin

package custody_test

// The examples run real processes (sleep(1)) in a ledger of their own. A program that uses
// custody calls custody.Init() first thing in main, because its own binary, re-executed, is its
// owner-death supervisor; in this package's tests TestMain makes that call.

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/custody-dev/custody"
	"github.com/custody-dev/custody/ledger"
)

// exampleLedger opens a ledger in a new directory, for an example that must not write the user's
// own; the returned function removes it. A program leaves Owner.Ledger nil for the default.
func exampleLedger() (*ledger.Ledger, func()) {
	dir, err := os.MkdirTemp("", "custody-example-")
	if err != nil {
		log.Fatal(err)
	}
	return ledger.Open(filepath.Join(dir, "spawn-ledger.json")), func() { os.RemoveAll(dir) }
}

// An owner starts a child in a scope of its own, covered by its supervisor and recorded in the
// ledger; a stop asks it to exit (SIGTERM), waits up to the grace, kills what is left, and says
// only what it saw.
func ExampleOwner_Start() {
	l, remove := exampleLedger()
	defer remove()
	owner := &custody.Owner{Ledger: l} // custody.Owner{} in a program: the user's ledger
	defer owner.Close()                // stops whatever is still running, ends the supervisor

	ctx := context.Background()
	child, err := owner.Start(ctx, exec.Command("sleep", "60"), custody.StartOptions{Purpose: "serve"})
	if err != nil {
		log.Fatal(err)
	}
	res := child.Stop(ctx, custody.StopOptions{Grace: 3 * time.Second})
	fmt.Println("outcome:", res.Outcome, "request:", res.Request, "forced:", res.Forced)
	fmt.Println("wait:", child.Wait())
	// Output:
	// outcome: exited request: SIGTERM forced: false
	// wait: signal: terminated
}

// A slot runs one generation at a time: Replace stops the running generation, and starts the
// next only once that one's exit is proven.
func ExampleSlot() {
	l, remove := exampleLedger()
	defer remove()
	slot := &custody.Slot{Owner: &custody.Owner{Ledger: l}, Purpose: "serve",
		Stop: custody.StopOptions{Grace: 3 * time.Second}}
	defer slot.Owner.Close()

	ctx := context.Background()
	var previous *custody.Child
	for range 3 {
		child, err := slot.Replace(ctx, exec.Command("sleep", "60"))
		if err != nil {
			log.Fatal(err)
		}
		_, gen := slot.Current()
		if previous == nil {
			fmt.Printf("generation %d runs\n", gen)
		} else {
			fmt.Printf("generation %d runs; the one before ended first: %v\n", gen, previous.Wait())
		}
		previous = child
	}
	last, _ := slot.Current()
	fmt.Println("last:", last.Stop(ctx, slot.Stop).Outcome)
	// Output:
	// generation 1 runs
	// generation 2 runs; the one before ended first: signal: terminated
	// generation 3 runs; the one before ended first: signal: terminated
	// last: exited
}

// A grant hands a live child to another owner with no moment in which nobody owns it: the
// receiver proves the child, covers it and records its receipt, and only then does the giver let
// go. Here both owners live in one process; usually the grant string travels to another program
// (custody adopt GRANT, or one that calls Owner.Adopt).
func ExampleChild_Grant() {
	l, remove := exampleLedger()
	defer remove()
	giver := &custody.Owner{Ledger: l}
	defer giver.Close()
	receiver := &custody.Owner{Ledger: l} // a receiver records its receipt in the grant's ledger
	defer receiver.Close()

	ctx := context.Background()
	child, err := giver.Start(ctx, exec.Command("sleep", "60"), custody.StartOptions{Purpose: "gateway"})
	if err != nil {
		log.Fatal(err)
	}
	grant, err := child.Grant(custody.GrantOptions{TTL: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	adopted, err := receiver.Adopt(ctx, grant.String())
	if err != nil {
		log.Fatal(err)
	}
	res, err := grant.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("grant:", res.Outcome, "to this process:", res.Receiver == os.Getpid())
	fmt.Println("same child:", adopted.ID.PID == child.ID.PID)
	fmt.Println("the giver's stop:", child.Stop(ctx, custody.StopOptions{}).Outcome)
	fmt.Println("the receiver's stop:", adopted.Stop(ctx, custody.StopOptions{Grace: 3 * time.Second}).Outcome)
	// Output:
	// grant: transferred to this process: true
	// same child: true
	// the giver's stop: no-authority
	// the receiver's stop: exited
}

// The receiver's side of a transfer, in a program handed a grant string (here in an environment
// variable): once Adopt returns, the child dies with this owner, and Close stops it.
func ExampleOwner_Adopt() {
	owner := &custody.Owner{}
	defer owner.Close()
	child, err := owner.Adopt(context.Background(), os.Getenv("BACKEND_GRANT"))
	if err != nil {
		log.Fatal(err) // malformed, expired, used, forged or another user's: nothing changed
	}
	fmt.Println("now owning", child.ID.PID)
}
