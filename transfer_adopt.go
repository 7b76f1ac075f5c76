package custody

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/custody-dev/custody/authority"
	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// ErrExitUnknown is what [Child.Wait] returns for an adopted child that has exited when the OS
// does not report its exit status to a process other than its parent (macOS; Linux before 6.15;
// a parent that did not reap it within reapWait): it was seen to exit, and nothing more is known.
var ErrExitUnknown = errors.New("exited; its status goes to its parent only")

// reapWait bounds the wait for an adopted child's parent to reap it, which is when Linux makes
// its exit status readable through a pidfd.
const reapWait = time.Second

// ExitError is what [Child.Wait] returns for an adopted child that exited with a non-zero code
// or was killed by a signal, where the OS reports that to a non-parent (Linux 6.15+).
type ExitError struct {
	PID int
	authority.ExitStatus
}

func (e *ExitError) Error() string {
	if e.Signal != 0 {
		return fmt.Sprintf("custody: pid %d: killed by %v", e.PID, e.Signal)
	}
	return fmt.Sprintf("custody: pid %d: exit status %d", e.PID, e.Code)
}

// adoptHook, when set (by tests), is called at each step of a redemption: "proved" once the
// child is proven, before the receipt is written, and "receipt" after the receipt, before the
// scope is covered. A test kills the receiver there.
var adoptHook func(step string)

// Adopt redeems a grant (see [Child.Grant]) and becomes the owner of its child: it proves the
// child through a handle of its own, records the receipt in the ledger (the row's owner and
// spawner become this process), covers the child's scope with its own supervisor (Windows: a
// handle of its own on the child's job), and returns once the giver has let go. From then on the
// child dies with this owner, and [Child.Stop], [Child.Signal] and [Child.Release] work as for
// a child this owner started, and [Owner.Close] stops it. After Close, Adopt returns an error
// wrapping [ErrClosed].
//
// The grant is refused, with nothing changed, when it is malformed (an error wrapping
// [ErrGrantMalformed]), expired ([ErrGrantExpired]), forged, used, another user's, for a child
// that exited, or when its giver is gone ([ErrGrantRefused]). The owner must record its children
// in the ledger the grant names. Should this process die before the receipt is written, the
// child stays the giver's.
//
// If the giver dies in the instant between reading the receipt and releasing its own coverage,
// its supervisor stops the child: the failure leaves no process uncovered, and Adopt still
// returns the child, which is then seen to exit.
func (o *Owner) Adopt(ctx context.Context, grant string) (*Child, error) {
	if err := o.begin(); err != nil {
		return nil, fmt.Errorf("custody: adopt: %w", err)
	}
	defer o.ops.Done()
	c, err := o.redeem(ctx, grant)
	if err != nil {
		return nil, fmt.Errorf("custody: adopt: %w", err)
	}
	return c, nil
}

func (o *Owner) redeem(ctx context.Context, grant string) (*Child, error) {
	tok, err := parseGrant(grant)
	if err != nil {
		return nil, err
	}
	// A courtesy on the wall clock, which is all a token carries: it names an expiry the giver
	// has passed without a connection. The giver's own deadline, on its monotonic clock, decides.
	if time.Now().After(tok.expiry()) {
		return nil, fmt.Errorf("%w at %s", ErrGrantExpired, tok.expiry().Format(time.RFC3339))
	}
	if tok.Ledger != o.Ledger.Path() {
		return nil, fmt.Errorf("the receipt goes into ledger %s, but this owner's is %s", tok.Ledger, o.Ledger.Path())
	}
	if err := o.warm(); err != nil {
		return nil, err
	}
	conn, err := dialGrant(tok)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	r := bufio.NewReaderSize(conn, maxLine)
	if _, err := fmt.Fprintf(conn, "redeem %s\n", tok.Secret); err != nil {
		return nil, fmt.Errorf("%w: its giver is gone: %v", ErrGrantRefused, err)
	}
	line, err := readField(r, "child")
	if err != nil {
		return nil, refusal(err)
	}
	off, err := parseOffer(line)
	if err != nil {
		dropOffer(off)
		return nil, err
	}
	c, err := o.take(ctx, off)
	if err != nil {
		return nil, err
	}
	if err := c.confirm(conn, r); err != nil {
		c.abandon()
		return nil, err
	}
	o.track(c) // before its watcher may release it
	go c.watch()
	return c, nil
}

// refusal turns a failed read of the giver's answer into a refusal.
func refusal(err error) error {
	if errors.Is(err, ErrGrantRefused) {
		return err
	}
	return fmt.Errorf("%w: its giver is gone or the grant was used: %v", ErrGrantRefused, err)
}

// take proves the offered child, records the receipt and covers its scope.
func (o *Owner) take(ctx context.Context, off offer) (_ *Child, err error) {
	proc, err := o.prove(off)
	if err != nil {
		dropOffer(off) // adoptScope, which takes the offer's job handle, is not reached
		return nil, err
	}
	// Not a named result: "return nil, err" would zero it before the deferred abandon reads it.
	c := &Child{ID: proc.ID(), owner: o, proc: proc, done: make(chan struct{})}
	defer func() {
		if err != nil {
			c.abandon()
		}
	}()
	if c.scope, err = adoptScope(off, c.ID); err != nil {
		return nil, err
	}
	hook("proved")
	if c.row, err = o.receipt(ctx, c.ID); err != nil {
		return nil, err
	}
	hook("receipt")
	if err := o.coverAdopted(c.scope, c.scopeID()); err != nil {
		return nil, err
	}
	c.covered = true
	return c, nil
}

func hook(step string) {
	if adoptHook != nil {
		adoptHook(step)
	}
}

// prove opens a handle on the offered child and proves through it that it is the incarnation
// the giver named.
func (o *Owner) prove(off offer) (*authority.Process, error) {
	proc, err := authority.Acquire(off.id().Record())
	if errors.Is(err, procid.ErrGone) {
		return nil, fmt.Errorf("%w: pid %d is gone", ErrGrantRefused, off.PID)
	}
	return proc, err
}

// receipt makes this owner the owner of record of the child's row.
func (o *Owner) receipt(ctx context.Context, id procid.ID) (ledger.Row, error) {
	var row ledger.Row
	_, err := o.Ledger.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) {
		for i := range rows {
			if sameChild(rows[i], id) {
				if err := setOwner(&rows[i], o.self, o.Caller); err != nil {
					return nil, err
				}
				row = rows[i].Decoded()
				return rows, nil
			}
		}
		return nil, fmt.Errorf("pid %d: %w", id.PID, ledger.ErrNotRegistered)
	})
	if err != nil {
		return row, fmt.Errorf("record the receipt: %w", err)
	}
	return row, nil
}

// confirm tells the giver that the receipt is written and the scope covered, and waits for it to
// let go. A giver that refuses has found no receipt; one that vanishes has read it (see Adopt).
func (c *Child) confirm(conn io.Writer, r *bufio.Reader) error {
	if _, err := fmt.Fprintf(conn, "covered\n"); err != nil {
		return fmt.Errorf("%w: its giver is gone: %v", ErrGrantRefused, err)
	}
	if _, err := readField(r, "released"); errors.Is(err, ErrGrantRefused) {
		return err
	}
	return nil
}

// abandon undoes a redemption that did not complete: the giver still covers the child.
func (c *Child) abandon() {
	if c.covered {
		c.owner.uncover(c.scope)
	}
	if c.scope != nil {
		c.scope.Release() // not Close: the scope is the giver's again, and Close would kill it
	}
	c.proc.Close()
}

// watch closes done when an adopted child exits, which this process sees through its handle
// but cannot reap: its parent does. Then, as reap does for a started child, it releases the
// child if its scope is empty.
func (c *Child) watch() {
	if err := c.proc.Wait(context.Background()); err != nil {
		c.waitErr = err
	} else {
		c.waitErr = c.exitStatus()
	}
	close(c.done)
	c.releaseIfEmpty()
}
