package custody

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/custody-dev/custody/ledger"
	"github.com/custody-dev/custody/procid"
)

// errHandedOver refuses acts of ownership on a child that was handed to another owner.
var errHandedOver = errors.New("handed to another owner")

// childTransfer is what the transfer keeps on a [Child]; the rest of the Child knows only
// whether it was handed over.
type childTransfer struct {
	handedTo int    // the receiver's PID once the child was handed over (guarded by releaseMu)
	envGrant *Grant // the grant StartOptions.GrantEnv handed the child, or nil
}

// handedOver reports, as an error, that the child was handed to another owner. Callers hold the
// child's releaseMu.
func (t childTransfer) handedOver() error {
	if t.handedTo != 0 {
		return fmt.Errorf("%w (pid %d)", errHandedOver, t.handedTo)
	}
	return nil
}

// handable reports why c cannot be granted, or nil.
func (c *Child) handable() error {
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	switch {
	case c.transfer.handedOver() != nil:
		return c.transfer.handedOver()
	case c.released:
		return errors.New("released")
	}
	select {
	case <-c.done:
		return procid.ErrGone
	default:
		return nil
	}
}

// handOff is the giver's side of a redemption whose secret was right: it names the child to the
// receiver, waits for its word that the receipt is written and the scope covered, checks the
// receipt in the ledger, and only then releases its own coverage. Any failure keeps the child.
func (c *Child) handOff(conn grantConn, r *bufio.Reader, receiver int) TransferResult {
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	fail := func(why string) TransferResult {
		refuse(conn, why)
		return TransferResult{Outcome: Refused, Reason: why}
	}
	switch {
	case c.released:
		return fail("the child was released")
	case c.users > 0:
		return fail("the child is being stopped")
	}
	if exited, err := c.proc.Exited(); err != nil || exited {
		return fail(fmt.Sprintf("pid %d exited", c.ID.PID))
	}
	offer, err := c.offer(receiver)
	if err != nil {
		return fail(err.Error())
	}
	if _, err := fmt.Fprintf(conn, "child %s\n", offer); err != nil {
		return TransferResult{Outcome: Refused, Reason: "the receiver left: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if _, err := readField(r, "covered"); err != nil {
		why := "the receiver did not complete its receipt: " + err.Error()
		if rerr := c.reclaim(ctx, receiver); rerr != nil {
			why += "; " + rerr.Error()
		}
		return TransferResult{Outcome: Refused, Reason: why}
	}
	if err := c.findReceipt(ctx, receiver); err != nil {
		return fail(err.Error())
	}
	c.released, c.transfer.handedTo = true, receiver
	c.owner.untrack(c) // the receiver's now: the giver's Close leaves it alone
	res := TransferResult{Outcome: Transferred, Receiver: receiver}
	// Release, not Close: the scope is the receiver's now, and closing a cgroup kills it.
	if err := errors.Join(c.owner.uncover(c.scope), c.proc.Close(), c.scope.Release()); err != nil {
		res.Reason = "released, but " + err.Error()
	}
	fmt.Fprintf(conn, "released\n")
	return res
}

// offer describes the child for the receiver (see offer), with, on Windows, a handle on its
// job duplicated into the receiver.
func (c *Child) offer(receiver int) ([]byte, error) {
	off := offer{PID: c.ID.PID, Start: c.ID.Start, PidfdID: c.ID.PidfdID, Desc: c.scope.Desc()}
	var err error
	if off.Job, err = c.shareJob(receiver); err != nil {
		return nil, err
	}
	return json.Marshal(off)
}

// findReceipt checks that the ledger names receiver as the owner of c's incarnation.
func (c *Child) findReceipt(ctx context.Context, receiver int) error {
	rows, err := c.owner.Ledger.Rows(ctx)
	if err != nil {
		return fmt.Errorf("read the receipt: %w", err)
	}
	for _, r := range rows {
		if sameChild(r, c.ID) && r.Owner != nil && *r.Owner == receiver {
			return nil
		}
	}
	return fmt.Errorf("no receipt by pid %d for pid %d in the ledger", receiver, c.ID.PID)
}

// reclaim writes the giver back as the owner of c's row if receiver had written its receipt.
func (c *Child) reclaim(ctx context.Context, receiver int) error {
	_, err := c.owner.Ledger.Update(ctx, nil, func(rows []ledger.Row) ([]ledger.Row, error) {
		for i := range rows {
			if full := rows[i].Decoded(); sameChild(full, c.ID) && full.Owner != nil && *full.Owner == receiver {
				if err := setOwner(&rows[i], c.owner.self, c.owner.Caller); err != nil {
					return nil, err
				}
			}
		}
		return rows, nil
	})
	if err != nil {
		return fmt.Errorf("take the row back: %w", err)
	}
	return nil
}

// sameChild reports whether row records the incarnation id, by procid's rule: where both carry
// a pidfs id it decides, so a PID recycled within the child's start tick is not taken for it.
func sameChild(row ledger.Row, id procid.ID) bool { return row.Record().Same(id.Record()) }

// setOwner makes owner the row's owner and its spawner of record: reap judges a row by its
// spawner, and a transferred child must not be swept because the giver, which started it, is
// gone while the owner that covers it lives. The caller the owner serves replaces the previous
// owner's (or, nil, removes it): left in the row, it would name a process that no longer rules
// the child.
func setOwner(row *ledger.Row, owner procid.Incarnation, caller *procid.ID) error {
	// The giver's boot start and pidfs id go with it: left in the row, they would name the
	// giver, and the new owner, checked against them, would read as dead (a reap would stop its
	// child). The receiver's are recorded as a start records its spawner's (ledger.NewRow).
	var boot, pidfd, callerPID, callerStart any // nil: the field is removed
	if caller != nil {
		callerPID, callerStart = caller.PID, caller.Start
	}
	if owner.BootID != "" {
		boot = owner.BootStart
		if owner.PidfdID != 0 {
			pidfd = owner.PidfdID
		}
	}
	for _, f := range []struct {
		key string
		val any
	}{
		{"owner", owner.PID}, {"spawner_pid", owner.PID}, {"spawner_create", owner.CreateTime},
		{"spawner_start_ticks", owner.Start}, {"spawner_boot", boot}, {"spawner_pidfd_id", pidfd},
		{"caller_pid", callerPID}, {"caller_start_ticks", callerStart},
	} {
		var err error
		if f.val == nil {
			err = row.Delete(f.key)
		} else {
			err = row.Set(f.key, f.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
