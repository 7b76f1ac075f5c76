package supervise

import "strconv"

// envIDLine appends the envid line of g (see Group.ScopeID), when it has a scope id.
func envIDLine(dst []byte, g Group) []byte {
	if g.ScopeID == "" {
		return dst
	}
	dst = append(dst, "envid "...)
	dst = strconv.AppendInt(dst, int64(g.PGID), 10)
	dst = append(dst, ' ')
	dst = append(dst, g.ScopeID...)
	return append(dst, '\n')
}
