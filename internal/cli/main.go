// Package cli is the custody command line. cmd/custody only calls [Main]; each verb has an
// options struct and a run<Verb>(ctx, opts) function, and errors become exit codes in one place.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/supervise"
)

// exitCode is the process exit status. Every command's help lists the ones it uses.
type exitCode int

const (
	exitOK       exitCode = 0  // success
	exitError    exitCode = 1  // the command failed; nothing was changed
	exitUsage    exitCode = 2  // bad flags or arguments; nothing was changed
	exitUnproven exitCode = 3  // some outcome was not exited or already-exited (stop, reap)
	exitSocket   exitCode = 3  // supervise: the v2 socket could not be set up
	exitStale    exitCode = 4  // stop, reap: processes were signalled, then the ledger or the report failed
	exitUnknown  exitCode = 5  // adopt: the child exited; its status went to its parent alone
	exitLocked   exitCode = 11 // the ledger lock was held too long by another process; nothing written
	// run, adopt: the owner ended, and the child's scope was stopped; 128+SIGHUP, as a shell
	// reports a job whose terminal hung up
	exitOwnerGone exitCode = 129
)

// usageError marks bad input on the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitError carries a chosen exit status for an outcome already reported on stdout.
type statusError struct{ code exitCode }

func (e statusError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// codedError is an error reported like any other, but with a chosen exit status: for a failure
// after signals were sent, whose usual status would claim that nothing was.
type codedError struct {
	code exitCode
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// Main runs the command line with os.Args and returns the exit status.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return int(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) exitCode {
	err := newRoot(stdout, stderr).Run(ctx, append([]string{"custody"}, args...))
	return report(err, stderr)
}

// report prints err as one line and maps it to the exit status: the only place that does.
func report(err error, stderr io.Writer) exitCode {
	if err == nil {
		return exitOK
	}
	if se, ok := errors.AsType[statusError](err); ok {
		return se.code
	}
	// The library's errors name their package ("custody: start: …"); the line already says
	// custody, once.
	fmt.Fprintf(stderr, "custody: error: %s\n", strings.TrimPrefix(err.Error(), "custody: "))
	if ce, ok := errors.AsType[codedError](err); ok {
		return ce.code
	}
	switch {
	case ledger.IsLocked(err):
		fmt.Fprintln(stderr, "custody: hint: another process holds the ledger lock; if it is stopped, resume or end it")
		return exitLocked
	case errors.Is(err, errNoContainer):
		fmt.Fprintln(stderr, "custody: hint: "+containerRecipe)
	case isUsage(err):
		return exitUsage
	case errors.Is(err, supervise.ErrSocket):
		return exitSocket
	}
	return exitError
}

func isUsage(err error) bool {
	_, ok := errors.AsType[usageError](err)
	return ok
}
