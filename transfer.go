package custody

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Ownership transfer hands a live child from its owner (the giver) to another owner (the
// receiver) with no moment in which nobody covers it:
//
//  1. the giver mints a [Grant]: one-shot, serving one child, for the giver's user alone, with a
//     secret and an expiry ([DefaultGrantTTL]);
//  2. the receiver redeems it with [Owner.Adopt]: it presents the secret over the giver's socket,
//     learns the child's incarnation and scope, proves the child through a handle of its own,
//     records the receipt (the ledger row's owner and spawner become the receiver), covers the
//     scope with its own supervisor (Windows: takes its own handle on the job), and says so;
//  3. the giver finds the receipt in the ledger and only then releases its coverage.
//
// Every failure before step 3 leaves the child with the giver, covered as before: a receiver
// that dies, a forged or reused or expired grant, another user. A giver that dies before step 3
// takes the child with it, as any owner's death does.
//
// The receipt comes before the receiver's cover, not after: a supervisor kills what it covers
// when its owner dies, so a receiver that covered first and died before its receipt would kill a
// child that was still the giver's. Between the receipt and the receiver's cover the giver still
// covers the child; a receiver that dies there leaves it with the giver, which writes its own
// name back into the row.

// grantConn is one connection of a redemption: a Unix socket, or on Windows a named pipe.
type grantConn interface {
	io.ReadWriteCloser
	SetDeadline(time.Time) error
}

// grantListener is the giver's end: accept returns the next connection; Close makes a pending
// or later accept fail.
type grantListener interface {
	accept() (grantConn, error)
	Close() error
}

// DefaultGrantTTL is how long a grant is served when [GrantOptions.TTL] is zero.
const DefaultGrantTTL = 60 * time.Second

// handshakeTimeout bounds one redemption's exchange, so that a receiver that stops answering
// cannot hold a grant, or the giver's handoff, forever. It covers the receiver's ledger write,
// which may wait for the ledger lock.
const handshakeTimeout = 15 * time.Second

// GrantOptions tunes a grant.
type GrantOptions struct {
	// TTL is how long the grant is served; 0 means [DefaultGrantTTL].
	TTL time.Duration
}

// TransferOutcome is how a grant ended.
type TransferOutcome int

const (
	Transferred TransferOutcome = iota + 1 // a receiver recorded its receipt; the giver let go
	Refused                                // used by a redemption that failed, or voided (child gone, cancelled)
	Expired                                // nobody redeemed it in time
)

func (o TransferOutcome) String() string {
	switch o {
	case Transferred:
		return "transferred"
	case Refused:
		return "refused"
	case Expired:
		return "expired"
	}
	return "pending"
}

// TransferResult is what became of a grant.
type TransferResult struct {
	Outcome TransferOutcome
	// Receiver is the PID of the owner the child was handed to (Transferred only).
	Receiver int
	// Reason says why, for every outcome but Transferred.
	Reason string
}

// Grant is the giver's side of one transfer: it serves one redemption until it expires, its child
// exits, or it is cancelled. Its methods are safe for concurrent use.
type Grant struct {
	owner  *Owner
	tok    grantToken
	ln     grantListener // its Close removes what listening made (a Unix socket's directory)
	bound  chan *Child   // receives the child once, when it is known
	cancel chan struct{} // closed by Cancel
	done   chan struct{} // closed when the grant has ended
	res    TransferResult
	// deadline is when the giver stops serving the grant. It carries the monotonic clock's
	// reading, which the token's expires (wall-clock milliseconds) cannot: a step of the wall
	// clock neither ends the grant early nor extends it.
	deadline time.Time

	cancelOnce sync.Once
	endMu      sync.Mutex
	endWhy     TransferResult // set before the listener is closed from outside the server
}

// newGrant mints a grant and starts serving it; bind gives it its child.
func (o *Owner) newGrant(opts GrantOptions) (*Grant, error) {
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = DefaultGrantTTL
	}
	ln, addr, err := listenGrant()
	if err != nil {
		return nil, fmt.Errorf("grant: %w", err)
	}
	g := &Grant{owner: o, ln: ln, bound: make(chan *Child, 1), cancel: make(chan struct{}),
		done: make(chan struct{}), deadline: time.Now().Add(ttl)}
	g.tok = grantToken{Sock: addr, Giver: os.Getpid(), Ledger: o.Ledger.Path(), Secret: newSecret(),
		Expires: g.deadline.UnixMilli()}
	go g.serve()
	return g, nil
}

// Grant mints a grant for the running child c: the string to hand a receiver is
// [Grant.String]; [Grant.Wait] tells what became of it. Minting changes nothing until a receiver
// redeems it. It fails for a child that has exited or been handed over.
func (c *Child) Grant(opts GrantOptions) (*Grant, error) {
	if err := c.handable(); err != nil {
		return nil, fmt.Errorf("custody: grant pid %d: %w", c.ID.PID, err)
	}
	g, err := c.owner.newGrant(opts)
	if err != nil {
		return nil, fmt.Errorf("custody: grant pid %d: %w", c.ID.PID, err)
	}
	g.bind(c)
	return g, nil
}

// EnvGrant returns the grant [StartOptions.GrantEnv] handed the child at its start, or nil.
func (c *Child) EnvGrant() *Grant { return c.transfer.envGrant }

func (g *Grant) bind(c *Child) { g.bound <- c }

// String returns the grant string to hand a receiver (see [Owner.Adopt]).
func (g *Grant) String() string { return g.tok.String() }

// Expires returns the time the grant stops being served.
func (g *Grant) Expires() time.Time { return g.deadline }

// Done is closed when the grant has ended; [Grant.Result] then says how.
func (g *Grant) Done() <-chan struct{} { return g.done }

// Result returns how the grant ended; its Outcome is 0 while it is still served.
func (g *Grant) Result() TransferResult {
	select {
	case <-g.done:
		return g.res
	default:
		return TransferResult{}
	}
}

// Wait waits for the grant to end, or ctx to be done.
func (g *Grant) Wait(ctx context.Context) (TransferResult, error) {
	select {
	case <-g.done:
		return g.res, nil
	case <-ctx.Done():
		return TransferResult{}, fmt.Errorf("custody: wait for grant: %w", context.Cause(ctx))
	}
}

// Cancel stops serving the grant unless a redemption is already under way, which then completes.
// The child stays the giver's.
func (g *Grant) Cancel() {
	g.cancelOnce.Do(func() { close(g.cancel) })
}

// serve waits for the child, then serves connections until one presents the secret, and ends
// the grant.
func (g *Grant) serve() {
	defer close(g.done)
	defer g.ln.Close()
	var c *Child
	expiry := time.NewTimer(time.Until(g.deadline))
	defer expiry.Stop()
	select {
	case c = <-g.bound:
	case <-g.cancel:
		g.res = TransferResult{Outcome: Refused, Reason: "cancelled"}
		return
	case <-expiry.C:
		g.res = TransferResult{Outcome: Expired, Reason: "nobody redeemed it in time"}
		return
	}
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go g.watch(c, expiry.C, stopWatch)
	for {
		conn, err := g.ln.accept()
		if err != nil {
			g.res = g.ended(err)
			return
		}
		if res, consumed := g.handle(conn, c); consumed {
			g.res = res
			return
		}
	}
}

// watch closes the listener when the grant expires, is cancelled, or its child exits.
func (g *Grant) watch(c *Child, expired <-chan time.Time, stop <-chan struct{}) {
	var why TransferResult
	select {
	case <-stop:
		return
	case <-expired:
		why = TransferResult{Outcome: Expired, Reason: "nobody redeemed it in time"}
	case <-g.cancel:
		why = TransferResult{Outcome: Refused, Reason: "cancelled"}
	case <-c.done:
		why = TransferResult{Outcome: Refused, Reason: fmt.Sprintf("pid %d exited", c.ID.PID)}
	}
	g.endMu.Lock()
	g.endWhy = why
	g.endMu.Unlock()
	g.ln.Close()
}

// ended is the result of a listener that stopped accepting.
func (g *Grant) ended(err error) TransferResult {
	g.endMu.Lock()
	defer g.endMu.Unlock()
	if g.endWhy.Outcome != 0 {
		return g.endWhy
	}
	return TransferResult{Outcome: Refused, Reason: "accept: " + err.Error()}
}

// handle serves one connection. It reports consumed once the peer presented the secret: from then
// on the grant is spent, whatever the redemption's end. A peer of another user or with a wrong
// secret is refused and the grant stays served.
func (g *Grant) handle(conn grantConn, c *Child) (res TransferResult, consumed bool) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	r := bufio.NewReaderSize(conn, maxLine)
	peer, err := checkPeer(conn)
	if err != nil {
		refuse(conn, err.Error())
		return res, false
	}
	secret, err := readField(r, "redeem")
	if err != nil || !sameSecret(secret, g.tok.Secret) {
		refuse(conn, "forged grant")
		return res, false
	}
	if why := c.enclosed(peer); why != "" {
		refuse(conn, why) // not consumed: the grant stays served for a receiver outside
		return res, false
	}
	g.ln.Close() // one-shot: from here on nobody else can connect
	if time.Now().After(g.deadline) {
		refuse(conn, "expired")
		return TransferResult{Outcome: Expired, Reason: "presented after its expiry"}, true
	}
	return c.handOff(conn, r, peer), true
}

// grantEnv mints the grant [StartOptions.GrantEnv] asks for and puts it in cmd's environment.
func (o *Owner) grantEnv(cmd *exec.Cmd, opts StartOptions) (*Grant, error) {
	if opts.GrantEnv == "" {
		return nil, nil
	}
	if strings.ContainsAny(opts.GrantEnv, "=\x00") {
		return nil, fmt.Errorf("grant variable %q: not a variable name", opts.GrantEnv)
	}
	g, err := o.newGrant(GrantOptions{TTL: opts.GrantTTL})
	if err != nil {
		return nil, err
	}
	cmd.Env = append(cmd.Env, opts.GrantEnv+"="+g.String())
	return g, nil
}

// bindStart gives the grant its child once Start succeeded (ok), and voids it when Start failed.
func (g *Grant) bindStart(c *Child, ok bool) {
	switch {
	case g == nil:
	case !ok:
		g.Cancel()
	default:
		c.transfer.envGrant = g
		g.bind(c)
	}
}
