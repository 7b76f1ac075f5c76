//go:build linux || darwin

package supervise

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/custody-dev/custody/internal/localsock"
)

// outerConn is an open connection to the outer supervisor, with its answers' reader.
type outerConn struct {
	c  *net.UnixConn
	lr *lineReader
}

func (o *Outer) register(g Group) error {
	if g.PID == 0 {
		g.PID = g.PGID
	}
	if g.PGID <= 1 || g.PID != g.PGID || g.Start == UnknownStart {
		return fmt.Errorf("supervise: outer register pid %d pgid %d: %w", g.PID, g.PGID, ErrRefused)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.groups == nil {
		o.groups = make(map[int]Group)
	}
	if err := o.askLocked(registerLine(nil, g)); err != nil {
		return fmt.Errorf("supervise: outer register %d: %w", g.PGID, err)
	}
	o.groups[g.PGID] = g
	return nil
}

func (o *Outer) unregister(pgid int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.groups[pgid]; !ok {
		return nil
	}
	delete(o.groups, pgid)
	if err := o.askLocked(unregisterLine(nil, pgid)); err != nil {
		return fmt.Errorf("supervise: outer unregister %d: %w", pgid, err)
	}
	return nil
}

func (o *Outer) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn.c == nil {
		return nil
	}
	err := o.conn.c.Close()
	o.conn = outerConn{}
	return err
}

// askLocked sends one line and reads its answer. A connection that fails is dialled again once,
// with the registered set replayed first: a replaced outer supervisor covers it again.
func (o *Outer) askLocked(line []byte) error {
	fresh := o.conn.c == nil
	if fresh {
		if err := o.dialLocked(); err != nil {
			return err
		}
	}
	err := o.conn.ask(line)
	if err == nil || errors.Is(err, ErrRefused) || fresh {
		return err
	}
	o.conn.c.Close()
	o.conn = outerConn{}
	if err := o.dialLocked(); err != nil {
		return err
	}
	return o.conn.ask(line)
}

// dialLocked connects and replays the registered set.
func (o *Outer) dialLocked() error {
	c, err := localsock.Dial(o.Path)
	if err != nil {
		return fmt.Errorf("dial outer supervisor: %w", err)
	}
	// The path comes from the environment and names a place in the shared temporary directory:
	// were the outer owner's directory gone (both it and its supervisor dead, the directory
	// swept), another user could make one of that name and answer "ok" to every cover. Only a
	// listener of this user's is an outer supervisor; the kernel recorded its uid at listen(2).
	if _, err := localsock.CheckSameUser(c); err != nil {
		c.Close()
		return fmt.Errorf("dial outer supervisor %s: %w", o.Path, err)
	}
	o.conn = outerConn{c: c, lr: &lineReader{r: c}}
	for pgid, g := range o.groups {
		err := o.conn.ask(registerLine(nil, g))
		if errors.Is(err, ErrRefused) {
			// Most often a group gone since (the new supervisor finds no leader): nothing
			// is left to cover. A group whose leader exited while members remain is
			// refused too, and is covered by the nested owner's own supervisor alone.
			delete(o.groups, pgid)
			continue
		}
		if err != nil {
			c.Close()
			o.conn = outerConn{}
			return fmt.Errorf("replay to outer supervisor: %w", err)
		}
	}
	return nil
}

// ask writes line and waits up to NestTimeout for "ok" (nil) or "refused" ([ErrRefused]).
func (oc outerConn) ask(line []byte) error {
	oc.c.SetDeadline(time.Now().Add(NestTimeout))
	if _, err := oc.c.Write(line); err != nil {
		return err
	}
	answer, err := oc.lr.next()
	switch {
	case err != nil:
		return err
	case string(answer) == "ok":
		return nil
	case string(answer) == "refused":
		return ErrRefused
	}
	return fmt.Errorf("outer supervisor answered %q", answer)
}
