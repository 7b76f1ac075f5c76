package supervise_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// A nested owner's connection that sends garbage is answered "refused" line by line, a line too
// long included; half a line is refused, and a connection that says nothing closed, within
// NestTimeout rather than held open: a nested owner waiting for an answer learns where it
// stands, and a stray connection holds none of the supervisor's slots for long.
func TestNestGarbage(t *testing.T) {
	path, _, _ := serveNest(t, time.Second)
	for _, tc := range []struct {
		desc, send, want string
	}{
		{"a word", "garbage\n", "refused\n"},
		{"bytes", "\x00\xff\x01 \x7f\n", "refused\n"},
		{"a register beyond pid_t", "register 99999999999999\n", "refused\n"},
		{"a line too long", strings.Repeat("x", 300) + "\n", "refused\n"},
		{"nothing, then silence", "", ""},
		{"no newline", "register 5", "refused\n"},
		{"a line too long, unended", strings.Repeat("x", 300), "refused\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.send); err != nil {
				t.Fatal(err)
			}
			// Bound the test, not the supervisor: a connection still open after this is held.
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			got, err := bufio.NewReader(c).ReadString('\n')
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("after %q: no answer, and the connection still open after 30 s", tc.send)
			}
			if got != tc.want {
				t.Errorf("after %q: answer %q (%v), want %q", tc.send, got, err, tc.want)
			}
		})
	}
}
