package custody

import "fmt"

// String names the child for messages and logs: "pid 4242 (serve, cgroup /custody/…/s1)", or, for
// an adopted child, "pid 4242 (adopted, pgrp 4242)". Printed with %v, a Child would otherwise dump
// its owner, its handles and its row's raw bytes.
func (c *Child) String() string {
	if c == nil {
		return "<nil>"
	}
	what := c.row.Purpose
	if c.cmd == nil {
		what = "adopted"
	}
	if what == "" {
		return fmt.Sprintf("pid %d (%v)", c.ID.PID, c.scope)
	}
	return fmt.Sprintf("pid %d (%s, %v)", c.ID.PID, what, c.scope)
}
