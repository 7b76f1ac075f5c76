package supervise

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
)

// MaxLine is the longest protocol line in bytes, counting its newline. A longer line is discarded
// whole, up to and including its newline.
const MaxLine = 256

// errLong reports a line longer than [MaxLine] that was discarded.
var errLong = errors.New("line longer than 256 bytes discarded")

// errDying is a read of the owner's pipe that found nothing more to read from an owner that has
// begun to die (see dyingReader). Unlike other errors it does not end the stream: lines a dying
// thread was still writing may follow, then the end.
var errDying = errors.New("the owner is dying")

// lineReader splits a stream into newline-terminated lines with bounded memory: one read buffer
// and one line buffer, whatever the peer sends. Without the bound, an owner (or anyone who got the
// write end) could grow the supervisor without limit by never sending a newline.
type lineReader struct {
	r          io.Reader
	err        error // sticky read error, reported once the buffered bytes are consumed
	start, end int   // unconsumed bytes are buf[start:end]
	n          int   // bytes of the current line in line
	long       bool  // the current line overflowed: discard up to its newline
	buf        [4096]byte
	line       [MaxLine]byte
}

// next returns the next complete line without its newline (and without one trailing CR). The
// slice is valid until the next call. It returns errLong, once per over-long line, when that
// line's newline arrives; and the read error (io.EOF at a clean end) when the stream ends. An
// unterminated tail before the end is dropped: it is never a line, so it is never acted on.
func (lr *lineReader) next() ([]byte, error) {
	for {
		if line, err, ok := lr.scan(); ok {
			return line, err
		}
		if lr.err != nil {
			return nil, lr.err
		}
		n, err := lr.r.Read(lr.buf[:])
		lr.start, lr.end = 0, n
		if err == errDying { // read with nothing: not sticky
			return nil, err
		}
		lr.err = err // bytes read along with an error are consumed before the error is reported
	}
}

// scan consumes buffered bytes up to the next newline; ok reports whether a line ended there.
func (lr *lineReader) scan() (line []byte, err error, ok bool) {
	chunk := lr.buf[lr.start:lr.end]
	i := bytes.IndexByte(chunk, '\n')
	if i < 0 {
		lr.take(chunk)
		lr.start = lr.end
		return nil, nil, false
	}
	lr.take(chunk[:i])
	lr.start += i + 1
	n, long := lr.n, lr.long
	lr.n, lr.long = 0, false
	if long {
		return nil, errLong, true
	}
	return bytes.TrimSuffix(lr.line[:n], []byte{'\r'}), nil, true
}

// pending reports whether part of a line was read and its newline has not come yet.
func (lr *lineReader) pending() bool { return lr.n > 0 || lr.long || lr.start < lr.end }

// take appends b to the current line, or marks the line over-long once it cannot end within
// MaxLine bytes.
func (lr *lineReader) take(b []byte) {
	if lr.long {
		return
	}
	if lr.n+len(b) > MaxLine-1 { // the newline takes the last byte
		lr.long, lr.n = true, 0
		return
	}
	lr.n += copy(lr.line[lr.n:], b)
}

type verb int

const (
	verbNone verb = iota
	verbRegister
	verbUnregister
	verbCgroup   // custody's own: cover a cgroup scope
	verbUncgroup // custody's own: stop covering it
)

// command is one parsed protocol line.
type command struct {
	verb  verb
	pid   int    // the leader named by the three-field register; the pgid otherwise
	pgid  int    // the group
	start uint64 // the leader's start, when known
	known bool   // start was given (not "unknown", not the legacy form)
	id    uint64 // the leader's pidfs id, 0 when not given
	path  string // the cgroup, a hierarchy path (cgroup lines)
	// legacy: the one-field "register <pgid>", which binds whatever group has the id now
	legacy bool
}

// parseLine parses a protocol line; ok is false for anything that is not a well-formed command.
// Range checks on the group id (≤ 1, own group) are the server's, so that a refusal can be logged
// as one.
func parseLine(line []byte) (cmd command, ok bool) {
	var f [6][]byte
	n := fields(line, f[:])
	switch {
	case n == 2 && string(f[0]) == "register":
		pgid, ok := parseID(f[1])
		return command{verb: verbRegister, pid: pgid, pgid: pgid, legacy: true}, ok
	case (n == 4 || n == 5) && string(f[0]) == "register":
		pid, ok1 := parseID(f[1])
		pgid, ok2 := parseID(f[2])
		start, known, ok3 := parseStart(f[3])
		id, ok4 := uint64(0), true
		if n == 5 { // the leader's pidfs id: a positive integer, or the line is not a command
			id, ok4 = parseDecimal(f[4], math.MaxUint64)
			ok4 = ok4 && id > 0
		}
		return command{verb: verbRegister, pid: pid, pgid: pgid, start: start, known: known, id: id}, ok1 && ok2 && ok3 && ok4
	case n == 2 && string(f[0]) == "unregister":
		pgid, ok := parseID(f[1])
		return command{verb: verbUnregister, pid: pgid, pgid: pgid}, ok
	case n == 2 && string(f[0]) == "cgroup":
		return command{verb: verbCgroup, path: string(f[1])}, validCgroup(string(f[1]))
	case n == 2 && string(f[0]) == "uncgroup":
		return command{verb: verbUncgroup, path: string(f[1])}, validCgroup(string(f[1]))
	}
	return command{}, false
}

// fields splits line at runs of spaces and tabs into f, and returns how many fields it found,
// stopping at len(f): a caller that passes one slot more than it accepts sees excess as too many.
func fields(line []byte, f [][]byte) int {
	n := 0
	for n < len(f) {
		line = bytes.TrimLeft(line, " \t")
		if len(line) == 0 {
			break
		}
		i := bytes.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		f[n], line = line[:i], line[i:]
		n++
	}
	return n
}

// parseID parses a decimal process or group id, negative ones included (so that they can be
// refused by value). It rejects anything outside int32: pid_t is 32-bit even on 64-bit systems,
// and kill(-4294967297) would reach the kernel as kill(-1), a signal to every process we may signal.
func parseID(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	v, ok := parseDecimal(b, math.MaxInt32)
	if neg {
		return -int(v), ok
	}
	return int(v), ok
}

// parseStart parses a start in ticks (any uint64) or the word "unknown".
func parseStart(b []byte) (start uint64, known, ok bool) {
	if string(b) == "unknown" {
		return 0, false, true
	}
	v, ok := parseDecimal(b, math.MaxUint64)
	return v, ok, ok
}

// parseDecimal parses ASCII digits only (no sign, no spaces) into a value at most limit.
func parseDecimal(b []byte, limit uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// validCgroup accepts an absolute cgroup path of printable ASCII without spaces: the protocol is
// space-separated lines, and a control byte in a path could only be a mistake or a trick.
func validCgroup(p string) bool {
	if len(p) < 2 || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] > '~' {
			return false
		}
	}
	return true
}

// cgroupLine formats a cgroup or uncgroup line.
func cgroupLine(dst []byte, verb, path string) []byte {
	dst = append(dst, verb...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	return append(dst, '\n')
}

// registerLine formats the register line for g: the leader's pid, the group, its start ("unknown"
// standing for a zero start) and, when known, its pidfs id.
func registerLine(dst []byte, g Group) []byte {
	pid := g.PID
	if pid == 0 {
		pid = g.PGID
	}
	dst = append(dst, "register "...)
	dst = strconv.AppendInt(dst, int64(pid), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(g.PGID), 10)
	dst = append(dst, ' ')
	if g.Start == UnknownStart {
		dst = append(dst, "unknown"...)
	} else {
		dst = strconv.AppendUint(dst, g.Start, 10)
	}
	if g.PidfdID != 0 {
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, g.PidfdID, 10)
	}
	return envIDLine(append(dst, '\n'), g)
}

// unregisterLine formats the unregister line for a group.
func unregisterLine(dst []byte, pgid int) []byte {
	dst = append(dst, "unregister "...)
	dst = strconv.AppendInt(dst, int64(pgid), 10)
	return append(dst, '\n')
}
