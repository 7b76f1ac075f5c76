package procid

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// errStat reports a /proc/PID/stat line custody cannot parse.
var errStat = errors.New("malformed stat line")

// parseStat parses a /proc/PID/stat line. The command name (field 2) is in parentheses and may
// itself hold spaces, parentheses and newlines, so the fields are found after the *last* ')'.
func parseStat(line []byte) (Incarnation, error) {
	end := bytes.LastIndexByte(line, ')')
	if end < 0 || end+2 > len(line) {
		return Incarnation{}, fmt.Errorf("%w: no command name", errStat)
	}
	rest := line[end+2:]
	// rest starts at field 3 (state); start ticks is field 22, so 20 fields are needed.
	var fields [20][]byte
	n := 0
	for n < len(fields) {
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 {
			break
		}
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			i = len(rest)
		}
		fields[n] = bytes.TrimRight(rest[:i], "\n")
		rest = rest[i:]
		n++
	}
	if n < len(fields) {
		return Incarnation{}, fmt.Errorf("%w: %d fields after the command name, want at least %d", errStat, n, len(fields))
	}
	if len(fields[0]) != 1 {
		return Incarnation{}, fmt.Errorf("%w: state %q", errStat, fields[0])
	}
	ppid, err1 := strconv.Atoi(string(fields[1]))
	pgid, err2 := strconv.Atoi(string(fields[2]))
	start, err3 := strconv.ParseUint(string(fields[19]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Incarnation{}, fmt.Errorf("%w: %v", errStat, err)
	}
	state := fields[0][0]
	return Incarnation{
		ID:     ID{Start: start},
		PPID:   ppid,
		PGID:   pgid,
		Zombie: state == 'Z' || state == 'X' || state == 'x',
	}, nil
}
