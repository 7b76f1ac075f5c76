package supervise

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want command
		ok   bool
	}{
		{"register 42", command{verb: verbRegister, pid: 42, pgid: 42, legacy: true}, true},
		{"register 42 42 123456", command{verb: verbRegister, pid: 42, pgid: 42, start: 123456, known: true}, true},
		{"register 42 42 unknown", command{verb: verbRegister, pid: 42, pgid: 42}, true},
		{"register 41 42 7", command{verb: verbRegister, pid: 41, pgid: 42, start: 7, known: true}, true}, // refused by the server
		{"unregister 42", command{verb: verbUnregister, pid: 42, pgid: 42}, true},
		{"  register\t42  ", command{verb: verbRegister, pid: 42, pgid: 42, legacy: true}, true},
		{"register -1", command{verb: verbRegister, pid: -1, pgid: -1, legacy: true}, true}, // refused by value
		{"register 0", command{verb: verbRegister, legacy: true}, true},
		{"register 2147483647", command{verb: verbRegister, pid: 1<<31 - 1, pgid: 1<<31 - 1, legacy: true}, true},
		{"register 42 42 18446744073709551615", command{verb: verbRegister, pid: 42, pgid: 42, start: 1<<64 - 1, known: true}, true},
		{"", command{}, false},
		{"register", command{}, false},
		{"register 2147483648", command{}, false},
		{"register 4294967297", command{}, false},
		{"register -4294967297", command{}, false},
		{"register 42 42 18446744073709551616", command{}, false},
		{"register 42 42", command{}, false},
		{"register 42 42 123456 789", command{verb: verbRegister, pid: 42, pgid: 42, start: 123456, known: true, id: 789}, true},
		{"register 42 42 unknown 789", command{verb: verbRegister, pid: 42, pgid: 42, id: 789}, true},
		{"register 42 42 1 18446744073709551615", command{verb: verbRegister, pid: 42, pgid: 42, start: 1, known: true, id: 1<<64 - 1}, true},
		{"register 42 42 1 0", command{}, false}, // a pidfs id is positive
		{"register 42 42 1 -2", command{}, false},
		{"register 42 42 1 2.5", command{}, false},
		{"register 42 42 1 18446744073709551616", command{}, false},
		{"register 42 42 1 2 3", command{}, false},
		{"register 42 extra", command{}, false},
		{"register +42", command{}, false},
		{"register 0x2a", command{}, false},
		{"register --42", command{}, false},
		{"register -", command{}, false},
		{"register 42 42 -1", command{}, false},
		{"register 42 42 Unknown", command{}, false},
		{"Register 42", command{}, false},
		{"unregister", command{}, false},
		{"unregister 42 42", command{}, false},
		{"registe 42", command{}, false},
		{"ping", command{}, false},
		{"\xff\xfe 42", command{}, false},
		{"cgroup /custody/custody-4026531836-41-96/s1", command{verb: verbCgroup, path: "/custody/custody-4026531836-41-96/s1"}, true},
		{"uncgroup /custody/custody-4026531836-41-96/s1", command{verb: verbUncgroup, path: "/custody/custody-4026531836-41-96/s1"}, true},
		{"cgroup custody/s1", command{}, false},
		{"cgroup /", command{}, false},
		{"cgroup", command{}, false},
		{"cgroup /a /b", command{}, false},
		{"cgroup /a\x7f", command{}, false},
	} {
		got, ok := parseLine([]byte(tc.line))
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseLine(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 10<<20)
	for _, tc := range []struct {
		desc, in string
		want     []string // "!" stands for a discarded over-long line
	}{
		{"lines", "a\nb\n", []string{"a", "b"}},
		{"CRLF", "a\r\nb\r\n", []string{"a", "b"}},
		{"empty lines", "\n\na\n", []string{"", "", "a"}},
		{"unterminated tail dropped", "a\nregister 42", []string{"a"}},
		{"only a tail", "register 42", nil},
		{"longest line", strings.Repeat("y", MaxLine-1) + "\nz\n", []string{strings.Repeat("y", MaxLine-1), "z"}},
		{"one byte too long", strings.Repeat("y", MaxLine) + "\nz\n", []string{"!", "z"}},
		{"10 MB line then a line", long + "\nregister 42\n", []string{"!", "register 42"}},
		{"10 MB unterminated", "a\n" + long, []string{"a"}},
	} {
		for _, r := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{
			{"whole", func(r io.Reader) io.Reader { return r }},
			{"byte by byte", iotest.OneByteReader},
			{"data with EOF", iotest.DataErrReader},
		} {
			if r.name == "byte by byte" && len(tc.in) > 1<<16 {
				continue
			}
			lr := &lineReader{r: r.wrap(strings.NewReader(tc.in))}
			var got []string
			for {
				line, err := lr.next()
				if errors.Is(err, errLong) {
					got = append(got, "!")
					continue
				}
				if err != nil {
					if err != io.EOF {
						t.Errorf("%s, %s: %v", tc.desc, r.name, err)
					}
					break
				}
				got = append(got, string(line))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("%s, %s: got %q, want %q", tc.desc, r.name, shorten(got), shorten(tc.want))
			}
		}
	}
}

func shorten(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		if len(v) > 20 {
			v = v[:20] + "…"
		}
		out[i] = v
	}
	return out
}

func TestProtocolLinesRoundTrip(t *testing.T) {
	for _, g := range []Group{
		{PGID: 42},
		{PID: 42, PGID: 42, Start: 987654},
		{PGID: 1<<31 - 1, Start: 1<<64 - 1},
		{PID: 42, PGID: 42, Start: 987654, PidfdID: 1 << 40},
		{PGID: 42, PidfdID: 7},
	} {
		line := registerLine(nil, g)
		got, ok := parseLine(line[:len(line)-1])
		want := command{verb: verbRegister, pid: g.PGID, pgid: g.PGID, start: g.Start, known: g.Start != UnknownStart, id: g.PidfdID}
		if !ok || got != want {
			t.Errorf("registerLine(%+v) = %q parses as %+v, %v", g, line, got, ok)
		}
	}
	if got, ok := parseLine([]byte("unregister 42")); !ok || got.verb != verbUnregister || string(unregisterLine(nil, 42)) != "unregister 42\n" {
		t.Errorf("unregister round trip: %+v %v", got, ok)
	}
}

func BenchmarkParseLine(b *testing.B) {
	line := []byte("register 123456 123456 9876543210")
	b.ReportAllocs()
	for b.Loop() {
		parseLine(line)
	}
}
